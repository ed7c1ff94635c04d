import { useEffect, useMemo, useState } from "preact/hooks";
import type { ApiClient } from "../api.js";
import { formatCount } from "../format.js";
import { ErrorNotice } from "../ui.js";
import { HitGraphic } from "./hit-graphic.js";
import { HitTable } from "./hit-table.js";
import { readTabular, type TabularRead } from "./tabular.js";
import { type QuerySummary, readXmlSummary } from "./xml-summary.js";

/** Rows read into the table at most; the whole result is always one download away. */
const MAX_TABLE_ROWS = 100_000;
/** Queries and hits per query the graphic reads at most; the table and downloads have every hit. */
const GRAPHIC_LIMITS = { maxQueries: 500, maxHits: 50 };

function firstWord(text: string): string {
  return text.trim().split(/\s+/)[0] ?? "";
}

/** The id a query has in the tabular rendering: the first word of its definition, else its id. */
function tabularId(query: QuerySummary): string {
  return firstWord(query.def) || query.id;
}

/**
 * A finished job's results: the graphic overview per query and the sortable, paged hit table,
 * both read from the result streams the backend passes through.
 */
export default function ResultsView(props: { api: ApiClient; uuid: string }) {
  const { api, uuid } = props;
  const [table, setTable] = useState<TabularRead | undefined>(undefined);
  const [tableError, setTableError] = useState<unknown>(undefined);
  const [summary, setSummary] = useState<{ queries: QuerySummary[]; truncated: boolean } | undefined>(undefined);
  const [summaryError, setSummaryError] = useState<unknown>(undefined);
  const [selected, setSelected] = useState(0);

  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    api
      .results(uuid, "tabular", signal)
      .then((res) => readTabular(res.body ?? new ReadableStream(), MAX_TABLE_ROWS))
      .then(
        (read) => !signal.aborted && setTable(read),
        (error: unknown) => !signal.aborted && setTableError(error),
      );
    api
      .results(uuid, "xml", signal)
      .then((res) => readXmlSummary(res.body ?? new ReadableStream(), GRAPHIC_LIMITS))
      .then(
        (read) => !signal.aborted && setSummary(read),
        (error: unknown) => !signal.aborted && setSummaryError(error),
      );
    return () => controller.abort();
  }, [api, uuid]);

  const queries = summary?.queries ?? [];
  const query = queries[Math.min(selected, Math.max(0, queries.length - 1))];
  const rows = useMemo(() => {
    if (!table) return [];
    if (!query || queries.length < 2) return table.rows;
    const id = tabularId(query);
    return table.rows.filter((r) => r.qseqid === id);
  }, [table, query, queries.length]);

  return (
    <div class="results">
      {queries.length > 1 ? (
        <div class="toolbar">
          <div class="inline-field">
            <label for="query-select">Query</label>
            <select
              id="query-select"
              value={String(selected)}
              onChange={(e) => setSelected(Number(e.currentTarget.value))}
            >
              {queries.map((q) => (
                <option key={q.index} value={String(q.index)}>
                  {q.index + 1}. {q.def || q.id} ({formatCount(q.length)} letters)
                </option>
              ))}
            </select>
          </div>
          {summary?.truncated ? (
            <span class="muted">
              Showing the first {formatCount(queries.length)} queries; download the results for all.
            </span>
          ) : null}
        </div>
      ) : null}
      <h3>Graphic overview</h3>
      <ErrorNotice error={summaryError} title="The graphic could not be drawn:" />
      {!summary && !summaryError ? <p class="loading">Reading the alignments…</p> : null}
      {query ? (
        query.hits.length > 0 ? (
          <HitGraphic query={query} />
        ) : (
          <p class="empty">No hits for this query.</p>
        )
      ) : null}
      <h3>Hit table</h3>
      <ErrorNotice error={tableError} title="The hit table could not be read:" />
      {!table && !tableError ? <p class="loading">Reading the hit table…</p> : null}
      {table ? (
        <>
          {table.truncated ? (
            <p class="notice">
              The table shows the first {formatCount(MAX_TABLE_ROWS)} rows of a larger result; download the tabular file
              for every row.
            </p>
          ) : null}
          <HitTable rows={rows} caption={query && queries.length > 1 ? `Hits of ${query.def || query.id}` : "Hits"} />
        </>
      ) : null}
    </div>
  );
}
