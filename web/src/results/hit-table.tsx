import { useMemo, useState } from "preact/hooks";
import { formatCount } from "../format.js";
import { Pager, ScrollRegion } from "../ui.js";
import type { HitRow } from "./tabular.js";

type Column = { key: keyof HitRow; label: string; numeric: boolean };

const COLUMNS: readonly Column[] = [
  { key: "qseqid", label: "Query", numeric: false },
  { key: "sseqid", label: "Subject", numeric: false },
  { key: "pident", label: "% identity", numeric: true },
  { key: "length", label: "Length", numeric: true },
  { key: "mismatch", label: "Mismatches", numeric: true },
  { key: "gapopen", label: "Gap opens", numeric: true },
  { key: "qstart", label: "Q. start", numeric: true },
  { key: "qend", label: "Q. end", numeric: true },
  { key: "sstart", label: "S. start", numeric: true },
  { key: "send", label: "S. end", numeric: true },
  { key: "evalue", label: "E-value", numeric: true },
  { key: "bitscore", label: "Bit score", numeric: true },
];

const PAGE_SIZE = 50;

/** An e-value as BLAST's tabular output prints it: `0.0`, `3.45e-120`, `0.002`. */
export function formatEvalue(e: number): string {
  if (e === 0) return "0.0";
  return e < 0.0009 ? e.toExponential(2) : String(e);
}

/**
 * The hits as a table: every column sorts (click again to reverse; the report's own order is
 * the default), and it pages so a large result renders only one page at a time.
 */
export function HitTable(props: { rows: readonly HitRow[]; caption: string }) {
  const [sort, setSort] = useState<{ key: keyof HitRow; descending: boolean } | undefined>(undefined);
  const [page, setPage] = useState(1);
  const sorted = useMemo(() => {
    if (!sort) return props.rows;
    const factor = sort.descending ? -1 : 1;
    return [...props.rows].sort((a, b) => {
      const x = a[sort.key];
      const y = b[sort.key];
      return factor * (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y)));
    });
  }, [props.rows, sort]);
  const pages = Math.max(1, Math.ceil(sorted.length / PAGE_SIZE));
  const current = Math.min(page, pages);
  const shown = sorted.slice((current - 1) * PAGE_SIZE, current * PAGE_SIZE);

  const toggle = (column: Column) => {
    setPage(1);
    setSort((s) =>
      s?.key === column.key
        ? { key: column.key, descending: !s.descending }
        : { key: column.key, descending: column.key === "bitscore" || column.key === "pident" },
    );
  };

  return (
    <div>
      <ScrollRegion label={props.caption}>
        <table class="data-table hits">
          <caption class="visually-hidden">{props.caption}</caption>
          <thead>
            <tr>
              {COLUMNS.map((c) => (
                <th
                  key={c.key}
                  scope="col"
                  aria-sort={sort?.key === c.key ? (sort.descending ? "descending" : "ascending") : "none"}
                  class={c.numeric ? "num" : undefined}
                >
                  <button type="button" class="sort" onClick={() => toggle(c)}>
                    {c.label}
                    <span aria-hidden="true" class="sort-mark">
                      {sort?.key === c.key ? (sort.descending ? " ▼" : " ▲") : ""}
                    </span>
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {shown.map((row, i) => (
              <tr key={i}>
                {COLUMNS.map((c) => (
                  <td key={c.key} class={c.numeric ? "num" : undefined}>
                    {c.key === "evalue" ? formatEvalue(row.evalue) : String(row[c.key])}
                  </td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </ScrollRegion>
      <Pager label={`${props.caption} pages`} page={current} pages={pages} onPage={setPage}>
        Rows {formatCount(sorted.length === 0 ? 0 : (current - 1) * PAGE_SIZE + 1)}–
        {formatCount(Math.min(current * PAGE_SIZE, sorted.length))} of {formatCount(sorted.length)} (page {current} of{" "}
        {pages})
      </Pager>
    </div>
  );
}
