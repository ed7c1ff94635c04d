import type { HitPage } from "../api.js";

/** NCBI's graphic-summary colour key: alignment score (bits) bands, lowest first. */
export const SCORE_BANDS = [
  { below: 40, color: "#1f1f1f", label: "< 40" },
  { below: 50, color: "#1d4ed8", label: "40 – 50" },
  { below: 80, color: "#15803d", label: "50 – 80" },
  { below: 200, color: "#a21caf", label: "80 – 200" },
  { below: Number.POSITIVE_INFINITY, color: "#dc2626", label: "≥ 200" },
] as const;

function bandColor(bits: number): string {
  return SCORE_BANDS.find((b) => bits < b.below)?.color ?? "#dc2626";
}

const WIDTH = 760;
const LEFT = 12;
const RIGHT = 12;
const ROW = 10;
const TOP = 46;

function niceStep(length: number): number {
  const raw = length / 6;
  const magnitude = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  return [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? magnitude * 10;
}

/**
 * The graphic overview of one query, like NCBI's graphic summary: the query as a ruler, and below
 * it each hit's aligned span(s) on the query, coloured by score. An SVG with a text alternative;
 * every bar names its subject, span and score on hover, and clicking a bar goes to that hit in
 * the table (keyboard users reach the same hits through the table itself).
 */
export function HitGraphic(props: { page: HitPage; onSelect: (hitNumber: number) => void }) {
  const { query, hits } = props.page;
  const length = Math.max(
    query.query_len,
    ...hits.flatMap((h) => h.hsp_spans.map((s) => Math.max(s.query_from, s.query_to))),
    1,
  );
  const scale = (WIDTH - LEFT - RIGHT) / length;
  const x = (pos: number) => LEFT + (pos - 1) * scale;
  const step = niceStep(length);
  const ticks: number[] = [1];
  for (let t = step; t < length; t += step) ticks.push(t);
  const height = TOP + hits.length * ROW + 8;
  const titleId = `graphic-title-${query.n}`;
  const descId = `graphic-desc-${query.n}`;
  const first = hits[0];
  const best = first?.hsp_spans[0];
  const label = query.query_def || query.query_id;
  const which =
    props.page.offset === 0
      ? `the top ${hits.length} hits`
      : `hits ${props.page.offset + 1}–${props.page.offset + hits.length}`;
  return (
    <figure class="graphic">
      <svg
        viewBox={`0 0 ${WIDTH} ${height}`}
        role="img"
        aria-labelledby={`${titleId} ${descId}`}
        preserveAspectRatio="xMinYMin meet"
      >
        <title id={titleId}>
          Distribution of {which} on the query {label}
        </title>
        <desc id={descId}>
          Query length {query.query_len} letters.{" "}
          {first && best
            ? `Hit ${first.num}, ${first.title || first.id}, aligns at positions ${best.query_from} to ${best.query_to} with a score of ${best.bit_score} bits.`
            : "No hits."}
        </desc>
        <rect x={LEFT} y={8} width={WIDTH - LEFT - RIGHT} height={8} fill="#94a3b8" rx={2} />
        {ticks.map((t) => (
          <g key={t}>
            <line x1={x(t)} x2={x(t)} y1={16} y2={22} stroke="#475569" />
            <text x={x(t)} y={34} font-size={11} text-anchor={t === 1 ? "start" : "middle"} fill="#334155">
              {t}
            </text>
          </g>
        ))}
        {hits.map((hit, row) => {
          const y = TOP + row * ROW;
          const spans = hit.hsp_spans.map(
            (s) => [Math.min(s.query_from, s.query_to), Math.max(s.query_from, s.query_to)] as const,
          );
          const firstPos = Math.min(...spans.map((s) => s[0]));
          const lastPos = Math.max(...spans.map((s) => s[1]));
          return (
            // biome-ignore lint/a11y/noStaticElementInteractions: a mouse shortcut; the hit table is the keyboard path to each hit
            <g key={hit.num} class="hit-row" data-hit={hit.num} onClick={() => props.onSelect(hit.num)}>
              {spans.length > 1 ? (
                <line x1={x(firstPos)} x2={x(lastPos)} y1={y + 3.5} y2={y + 3.5} stroke="#94a3b8" />
              ) : null}
              {hit.hsp_spans.map((hsp, i) => {
                const [from, to] = spans[i] ?? [hsp.query_from, hsp.query_to];
                return (
                  <rect
                    key={i}
                    x={x(from)}
                    y={y}
                    width={Math.max(1, (to - from + 1) * scale)}
                    height={7}
                    fill={bandColor(hsp.bit_score)}
                  >
                    <title>
                      {hit.num}. {hit.title || hit.id}: query {from}–{to}, {hsp.bit_score} bits
                    </title>
                  </rect>
                );
              })}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <span>Colour key for alignment scores (bits):</span>
        <ul class="legend">
          {SCORE_BANDS.map((b) => (
            <li key={b.label}>
              <span class="swatch" style={{ background: b.color }} aria-hidden="true" />
              {b.label}
            </li>
          ))}
        </ul>
        <span class="muted">Click a bar to go to its hit in the table.</span>
      </figcaption>
    </figure>
  );
}
