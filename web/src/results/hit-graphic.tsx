import type { QuerySummary } from "./xml-summary.js";

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
 * every bar names its subject, span and score on hover.
 */
export function HitGraphic(props: { query: QuerySummary }) {
  const { query } = props;
  const length = Math.max(
    query.length,
    ...query.hits.flatMap((h) => h.hsps.map((s) => Math.max(s.queryFrom, s.queryTo))),
    1,
  );
  const scale = (WIDTH - LEFT - RIGHT) / length;
  const x = (pos: number) => LEFT + (pos - 1) * scale;
  const step = niceStep(length);
  const ticks: number[] = [1];
  for (let t = step; t < length; t += step) ticks.push(t);
  const height = TOP + query.hits.length * ROW + 8;
  const titleId = `graphic-title-${query.index}`;
  const descId = `graphic-desc-${query.index}`;
  const best = query.hits[0]?.hsps[0];
  return (
    <figure class="graphic">
      <svg
        viewBox={`0 0 ${WIDTH} ${height}`}
        role="img"
        aria-labelledby={`${titleId} ${descId}`}
        preserveAspectRatio="xMinYMin meet"
      >
        <title id={titleId}>
          Distribution of the top {query.hits.length} hits on the query {query.def || query.id}
        </title>
        <desc id={descId}>
          Query length {query.length} letters.{" "}
          {best
            ? `The best hit, ${query.hits[0]?.def || query.hits[0]?.id}, aligns at positions ${best.queryFrom} to ${best.queryTo} with a score of ${best.bitScore} bits.`
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
        {query.hits.map((hit, row) => {
          const y = TOP + row * ROW;
          const spans = hit.hsps.map(
            (s) => [Math.min(s.queryFrom, s.queryTo), Math.max(s.queryFrom, s.queryTo)] as const,
          );
          const first = Math.min(...spans.map((s) => s[0]));
          const last = Math.max(...spans.map((s) => s[1]));
          return (
            <g key={`${hit.id}-${row}`} class="hit-row">
              {hit.hsps.length > 1 ? (
                <line x1={x(first)} x2={x(last)} y1={y + 3.5} y2={y + 3.5} stroke="#94a3b8" />
              ) : null}
              {hit.hsps.map((hsp, i) => {
                const [from, to] = spans[i] ?? [hsp.queryFrom, hsp.queryTo];
                return (
                  <rect
                    key={i}
                    x={x(from)}
                    y={y}
                    width={Math.max(1, (to - from + 1) * scale)}
                    height={7}
                    fill={bandColor(hsp.bitScore)}
                  >
                    <title>
                      {hit.def || hit.id}: query {from}–{to}, {hsp.bitScore} bits, e-value {hsp.evalue}
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
        {query.moreHits > 0 ? (
          <span class="muted">
            The graphic shows the top {query.hits.length} hits; {query.moreHits} more are in the table and downloads.
          </span>
        ) : null}
      </figcaption>
    </figure>
  );
}
