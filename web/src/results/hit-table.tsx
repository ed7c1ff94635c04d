import type { HitPage } from "../api.js";
import { formatCount } from "../format.js";
import { ScrollRegion } from "../ui.js";

/** An e-value as BLAST prints it: `0.0`, `3.45e-120`, `0.002`. */
export function formatEvalue(e: number): string {
  if (e === 0) return "0.0";
  return e < 0.0009 ? e.toExponential(2) : String(e);
}

/** The DOM id of hit `k` of query `n`'s row (the graphic's bars scroll to it). */
export function hitRowId(n: number, k: number): string {
  return `hit-${n}-${k}`;
}

/**
 * One page of a query's hits, as NCBI's "Descriptions" table: a box to choose the hit for the
 * FASTA download, its title (which opens its alignments), accession, scores, query cover,
 * e-value, identity and subject length, in the report's order (best first).
 */
export function HitTable(props: {
  page: HitPage;
  caption: string;
  selected: ReadonlySet<number>;
  onToggle: (hitNumbers: readonly number[], on: boolean) => void;
  onOpen: (hitNumber: number) => void;
  open: number | undefined;
  highlighted: number | undefined;
}) {
  const { page } = props;
  const n = page.query.n;
  const allOnPage = page.hits.length > 0 && page.hits.every((h) => props.selected.has(h.num));
  return (
    <ScrollRegion label={props.caption}>
      <table class="data-table hits">
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            <th scope="col">
              <input
                type="checkbox"
                aria-label="Select all hits on this page"
                checked={allOnPage}
                onChange={(e) =>
                  props.onToggle(
                    page.hits.map((h) => h.num),
                    e.currentTarget.checked,
                  )
                }
              />
            </th>
            <th scope="col" class="num">
              #
            </th>
            <th scope="col">Description</th>
            <th scope="col">Accession</th>
            <th scope="col" class="num">
              Max score
            </th>
            <th scope="col" class="num">
              Total score
            </th>
            <th scope="col" class="num">
              Query cover
            </th>
            <th scope="col" class="num">
              E value
            </th>
            <th scope="col" class="num">
              Per. ident
            </th>
            <th scope="col" class="num">
              Acc. len
            </th>
          </tr>
        </thead>
        <tbody>
          {page.hits.map((hit) => (
            <tr
              key={hit.num}
              id={hitRowId(n, hit.num)}
              tabIndex={-1}
              class={hit.num === props.highlighted ? "highlight" : undefined}
              aria-current={hit.num === props.open ? "true" : undefined}
            >
              <td>
                <input
                  type="checkbox"
                  aria-label={`Select hit ${hit.num}, ${hit.accession || hit.id}`}
                  checked={props.selected.has(hit.num)}
                  onChange={(e) => props.onToggle([hit.num], e.currentTarget.checked)}
                />
              </td>
              <td class="num">{hit.num}</td>
              <td class="wrap description">
                <button type="button" class="text-link" onClick={() => props.onOpen(hit.num)}>
                  {hit.title || hit.id}
                </button>
              </td>
              <td>{hit.accession || hit.id}</td>
              <td class="num">{Math.round(hit.bit_score)}</td>
              <td class="num">{Math.round(hit.total_bit_score)}</td>
              <td class="num">{hit.query_cover}%</td>
              <td class="num">{formatEvalue(hit.evalue)}</td>
              <td class="num">{hit.identity}%</td>
              <td class="num">{formatCount(hit.len)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </ScrollRegion>
  );
}
