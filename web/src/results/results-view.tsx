import { useEffect, useState } from "preact/hooks";
import { type ApiClient, ApiError, type HitDetail, type HitPage } from "../api.js";
import { alignedFastaFileName } from "../../../shared/dashboard/result-file-names.js";
import { saveBlob } from "../download.js";
import { formatBytes, formatCount } from "../format.js";
import { ErrorNotice, Pager, useAsync } from "../ui.js";
import { alignedRegionsFasta } from "./alignment.js";
import { AlignmentView } from "./alignment-view.js";
import { HitGraphic } from "./hit-graphic.js";
import { formatEvalue, HitTable, hitRowId } from "./hit-table.js";

/** Queries listed per page of the query navigation. */
export const QUERY_PAGE_SIZE = 10;
/** Hits per page of the table (and bars in the graphic). */
export const HIT_PAGE_SIZE = 50;

/** A result stored before result pages existed: its pages answer 404 with this in the detail. */
function isMissingIndex(error: unknown): boolean {
  return error instanceof ApiError && error.status === 404 && /no index/.test(String(error.detail));
}

function pageOf(n: number, size: number): number {
  return Math.floor((n - 1) / size) * size;
}

/**
 * A completed job's results, read a page at a time from the dashboard's result routes (never the
 * whole XML): the queries in pages of {@link QUERY_PAGE_SIZE}, the chosen query's graphic and
 * hit table a page of {@link HIT_PAGE_SIZE} hits at a time, and one hit's alignments when asked.
 */
export default function ResultsView(props: {
  api: ApiClient;
  uuid: string;
  /** The stem of the page's download names (`<title or job>`). */
  fileBase: string;
  onDownloadXml: () => void;
}) {
  const { api, uuid } = props;
  const [queryOffset, setQueryOffset] = useState(0);
  const [current, setCurrent] = useState(1);
  const [hitOffset, setHitOffset] = useState(0);
  const [open, setOpen] = useState<number | undefined>(undefined);
  const [highlighted, setHighlighted] = useState<number | undefined>(undefined);
  const [selected, setSelected] = useState<ReadonlySet<number>>(new Set());

  const queries = useAsync(
    (signal) => api.resultQueries(uuid, { offset: queryOffset, limit: QUERY_PAGE_SIZE }, signal),
    [api, uuid, queryOffset],
  );
  const hits = useAsync(
    (signal) => api.resultHits(uuid, current, { offset: hitOffset, limit: HIT_PAGE_SIZE }, signal),
    [api, uuid, current, hitOffset],
  );
  const detail = useAsync(
    (signal) => (open === undefined ? Promise.resolve(undefined) : api.resultHit(uuid, current, open, signal)),
    [api, uuid, current, open],
  );

  // A bar of the graphic was clicked: bring its row into view once it is on the page.
  useEffect(() => {
    if (highlighted === undefined || hits.loading) return;
    const row = document.getElementById(hitRowId(current, highlighted));
    row?.scrollIntoView({ block: "center" });
    row?.focus({ preventScroll: true });
  }, [highlighted, hits.loading, current]);

  // The alignments were asked for: show them where the reader is looking.
  useEffect(() => {
    if (!detail.data || open === undefined) return;
    const heading = document.getElementById(`alignment-${current}-${open}`);
    heading?.scrollIntoView({ block: "start" });
    heading?.focus({ preventScroll: true });
  }, [detail.data, open, current]);

  if (isMissingIndex(queries.error)) {
    return (
      <div class="notice" role="status">
        <p>
          <strong>This result cannot be shown page by page:</strong> {String((queries.error as ApiError).detail)}.
        </p>
        <p>
          <button type="button" onClick={props.onDownloadXml}>
            Download the BLAST XML
          </button>{" "}
          (or run the search again: a new run stores the index the pages read).
        </p>
      </div>
    );
  }

  const total = queries.data?.total ?? 0;
  const goToQuery = (n: number) => {
    setCurrent(n);
    setQueryOffset(pageOf(n, QUERY_PAGE_SIZE));
    setHitOffset(0);
    setOpen(undefined);
    setHighlighted(undefined);
    setSelected(new Set());
  };
  const selectHit = (k: number) => {
    setHitOffset(pageOf(k, HIT_PAGE_SIZE));
    setHighlighted(k);
  };
  const query = hits.data?.query.n === current ? hits.data.query : undefined;
  const label = query ? query.query_def || query.query_id : `query ${current}`;
  const hitPage = hits.data && hits.data.query.n === current ? hits.data : undefined;

  return (
    <div class="results">
      <ErrorNotice error={queries.error} title="The queries could not be read:" />
      {queries.data ? (
        <p>
          {formatCount(total)} {total === 1 ? "query" : "queries"} against {queries.data.database} (
          {queries.data.program}); the whole BLAST XML is {formatBytes(queries.data.xml_bytes)}
          {queries.data.stored_bytes !== null ? ` (${formatBytes(queries.data.stored_bytes)} stored)` : ""}. The page
          reads it a query at a time.
        </p>
      ) : queries.loading ? (
        <p class="loading">Reading the queries…</p>
      ) : null}

      {queries.data && total > 1 ? (
        <nav class="query-nav" aria-label="Queries">
          <h3>Queries</h3>
          <ol class="query-list" start={queryOffset + 1}>
            {queries.data.queries.map((q) => (
              <li key={q.n}>
                <button
                  type="button"
                  class="text-link"
                  aria-current={q.n === current ? "true" : undefined}
                  onClick={() => goToQuery(q.n)}
                >
                  {q.query_def || q.query_id}
                </button>{" "}
                <span class="muted">
                  {formatCount(q.query_len)} letters, {formatCount(q.hits)} {q.hits === 1 ? "hit" : "hits"}
                  {q.best_evalue !== null ? `, best e-value ${formatEvalue(q.best_evalue)}` : ""}
                </span>
              </li>
            ))}
          </ol>
          <Pager
            label="Query list pages"
            page={queryOffset / QUERY_PAGE_SIZE + 1}
            pages={Math.max(1, Math.ceil(total / QUERY_PAGE_SIZE))}
            onPage={(p) => setQueryOffset((p - 1) * QUERY_PAGE_SIZE)}
          >
            Queries {formatCount(queryOffset + 1)}–{formatCount(Math.min(total, queryOffset + QUERY_PAGE_SIZE))} of{" "}
            {formatCount(total)}
          </Pager>
        </nav>
      ) : null}

      {queries.data ? (
        <>
          <div class="toolbar query-heading">
            <h3>
              Query {formatCount(current)} of {formatCount(total)}: {label}
            </h3>
            {total > 1 ? (
              <span class="row">
                <button type="button" disabled={current <= 1} onClick={() => goToQuery(current - 1)}>
                  Previous query
                </button>
                <button type="button" disabled={current >= total} onClick={() => goToQuery(current + 1)}>
                  Next query
                </button>
              </span>
            ) : null}
          </div>
          <ErrorNotice error={hits.error} title="The hits could not be read:" />
          {!hitPage && hits.loading ? <p class="loading">Reading the hits…</p> : null}
          {hitPage ? (
            hitPage.total === 0 ? (
              <p class="empty">No hits for this query.</p>
            ) : (
              <QueryHits
                api={api}
                uuid={uuid}
                fileBase={props.fileBase}
                page={hitPage}
                label={label}
                selected={selected}
                setSelected={setSelected}
                open={open}
                setOpen={setOpen}
                highlighted={highlighted}
                onBar={selectHit}
                onHitPage={(offset) => {
                  setHitOffset(offset);
                  setHighlighted(undefined);
                }}
              />
            )
          ) : null}
          <ErrorNotice error={detail.error} title="The alignments could not be read:" />
          {open !== undefined && detail.loading ? <p class="loading">Reading the alignments…</p> : null}
          {detail.data && detail.data.hit.num === open && detail.data.query.n === current ? (
            <AlignmentView detail={detail.data} onClose={() => setOpen(undefined)} />
          ) : null}
        </>
      ) : null}
    </div>
  );
}

/** The chosen query's graphic, hit table (a page), and the FASTA download of chosen hits. */
function QueryHits(props: {
  api: ApiClient;
  uuid: string;
  fileBase: string;
  page: HitPage;
  label: string;
  selected: ReadonlySet<number>;
  setSelected: (s: ReadonlySet<number>) => void;
  open: number | undefined;
  setOpen: (k: number | undefined) => void;
  highlighted: number | undefined;
  onBar: (k: number) => void;
  onHitPage: (offset: number) => void;
}) {
  const { page } = props;
  const n = page.query.n;
  const [fasta, setFasta] = useState<{ busy: string } | undefined>(undefined);
  const [fastaError, setFastaError] = useState<unknown>(undefined);
  const toggle = (hits: readonly number[], on: boolean) => {
    const next = new Set(props.selected);
    for (const k of hits) {
      if (on) next.add(k);
      else next.delete(k);
    }
    props.setSelected(next);
  };
  const downloadFasta = async () => {
    setFastaError(undefined);
    const chosen = [...props.selected].sort((a, b) => a - b);
    const details: HitDetail[] = [];
    try {
      for (const [i, k] of chosen.entries()) {
        setFasta({ busy: `Reading hit ${i + 1} of ${chosen.length}…` });
        details.push(await props.api.resultHit(props.uuid, n, k));
      }
      saveBlob(
        new Blob([alignedRegionsFasta(details)], { type: "text/x-fasta" }),
        alignedFastaFileName(props.fileBase, n),
      );
    } catch (error) {
      setFastaError(error);
    } finally {
      setFasta(undefined);
    }
  };
  const pages = Math.max(1, Math.ceil(page.total / HIT_PAGE_SIZE));
  const current = Math.floor(page.offset / HIT_PAGE_SIZE) + 1;
  return (
    <>
      <h4>Graphic overview</h4>
      <HitGraphic page={page} onSelect={props.onBar} />
      <h4>Hits</h4>
      <div class="toolbar">
        <button type="button" disabled={props.selected.size === 0 || fasta !== undefined} onClick={downloadFasta}>
          {fasta?.busy ?? `Download FASTA of the selected hits' aligned regions (${props.selected.size})`}
        </button>
        <span class="muted">
          The aligned part of each subject, as it aligns (gaps removed); whole subject sequences are not available here.
        </span>
      </div>
      <ErrorNotice error={fastaError} title="The FASTA download failed:" />
      <HitTable
        page={page}
        caption={`Hits of ${props.label}`}
        selected={props.selected}
        onToggle={toggle}
        onOpen={(k) => props.setOpen(k)}
        open={props.open}
        highlighted={props.highlighted}
      />
      <Pager label="Hit pages" page={current} pages={pages} onPage={(p) => props.onHitPage((p - 1) * HIT_PAGE_SIZE)}>
        Hits {formatCount(page.offset + 1)}–{formatCount(page.offset + page.hits.length)} of {formatCount(page.total)}
      </Pager>
    </>
  );
}
