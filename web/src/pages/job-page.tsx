import type { ComponentType } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { type ApiClient, ApiError, type JobView, type ResultContent } from "../api.js";
import { saveLink } from "../download.js";
import { formatBytes, formatTime } from "../format.js";
import { Link } from "../router.js";
import { ErrorNotice, LiveText, PageTitle, StatusBadge, useApp, useAsync, useCan, usePolling } from "../ui.js";
import { resultFileBase, resultFileName } from "../../../shared/dashboard/result-file-names.js";
import { finishedSentence, statusLabel, stepTimes, storingSentence, TIMELINE_STEPS } from "./job-words.js";
import { isTerminal, jobTitle } from "./jobs-page.js";

/** How often a running job is re-read (the dashboard refreshes it from the job API every few seconds). */
const POLL_MS = 1500;

const STEPS = TIMELINE_STEPS;

function stepIndex(job: JobView): number {
  // "submitting" is both the dashboard's hand-over and the job API's start of shards: a job with
  // a job-API id and shards is running, otherwise still being handed over.
  if (job.status === "submitting") return job.openapi_job_id && job.progress ? 2 : 0;
  const index = STEPS.findIndex((s) => (s.statuses as readonly string[]).includes(job.status));
  return index === -1 ? 0 : index;
}

/** The downloads; each is saved as `<title or job>-<kind>.<ext>` (the ZIPs hold `.out.gz` files). */
const DOWNLOADS: readonly { content: ResultContent; label: string }[] = [
  { content: "xml", label: "BLAST XML" },
  { content: "tabular", label: "Tabular (outfmt 6)" },
  { content: "merged", label: "Merged result (ZIP of the gzip'd XML)" },
  { content: "full", label: "All shard outputs (ZIP of .gz files)" },
];

const PREFLIGHT = "memory pre-flight failed";

/** A download's size, known before downloading: the XML's, or the stored gzip's for the merged ZIP. */
function sizeOf(content: ResultContent, bytes: JobView["result_bytes"]): string {
  if (!bytes) return "";
  if (content === "xml") return ` (${formatBytes(bytes.xml)})`;
  if (content === "merged") return ` (${formatBytes(bytes.gzip)})`;
  return "";
}

/** One search: its status timeline, shard progress, details, and results once it has completed. */
export function JobPage(props: { uuid: string }) {
  const { api } = useApp();
  const canCancel = useCan("Contributor");
  const job = useAsync((signal) => api.getJob(props.uuid, signal), [props.uuid]);
  const [seen, setSeen] = useState<Record<string, string>>({});
  const [cancelError, setCancelError] = useState<unknown>(undefined);
  const [confirmingCancel, setConfirmingCancel] = useState(false);
  const data = job.data;
  const terminal = data ? isTerminal(data) : false;

  usePolling(async () => job.setData(await api.getJob(props.uuid)), data && !terminal ? POLL_MS : undefined);

  // When this page first saw each step (the job record keeps only its first and last times).
  useEffect(() => {
    if (!data) return;
    const key = STEPS[stepIndex(data)]?.key;
    if (key && !seen[key]) setSeen((s) => ({ ...s, [key]: terminal ? data.updated_at : new Date().toISOString() }));
  }, [data, seen, terminal]);

  if (!data) {
    return (
      <section>
        <PageTitle>Search</PageTitle>
        {job.error ? <ErrorNotice error={job.error} /> : <p class="loading">Loading the search…</p>}
        <p>
          <Link href="/blast/jobs">Back to all jobs</Link>
        </p>
      </section>
    );
  }

  const current = stepIndex(data);
  const progress = data.progress;
  const kept = stepTimes(data);
  return (
    <section>
      <PageTitle subtitle={<>Dashboard job {data.job_id}</>}>{jobTitle(data)}</PageTitle>
      <div class="toolbar">
        <span>
          Status: <StatusBadge status={data.status} />
        </span>
        {canCancel && !terminal && !confirmingCancel ? (
          <button type="button" onClick={() => setConfirmingCancel(true)}>
            Cancel search
          </button>
        ) : null}
      </div>
      {canCancel && !terminal && confirmingCancel ? (
        <div class="notice" role="alertdialog" aria-label="Cancel this search?">
          <p>Cancel this search? Its running shards stop, and it will have no results. This cannot be undone.</p>
          <div class="row">
            <button
              type="button"
              class="danger"
              onClick={async () => {
                setCancelError(undefined);
                try {
                  await api.cancelJob(data.job_id);
                  job.setData(await api.getJob(data.job_id));
                } catch (error) {
                  setCancelError(error);
                } finally {
                  setConfirmingCancel(false);
                }
              }}
            >
              Yes, cancel the search
            </button>
            <button type="button" onClick={() => setConfirmingCancel(false)}>
              Keep it running
            </button>
          </div>
        </div>
      ) : null}
      <ErrorNotice error={cancelError} title="Could not cancel:" />
      <ErrorNotice error={job.error} title="Could not refresh:" />

      <ol class="timeline" aria-label="Status timeline">
        {STEPS.map((step, i) => {
          const done = i < current || (i === current && terminal);
          const label = step.key === "finished" && i <= current && terminal ? statusLabel(data.status) : step.label;
          // The times the dashboard kept; what this page saw stands in for jobs stored before them.
          const time = kept[step.key] ?? seen[step.key];
          return (
            <li
              key={step.key}
              class={done ? "done" : i === current ? "current" : "todo"}
              aria-current={i === current ? "step" : undefined}
            >
              <span class="dot" aria-hidden="true" />
              <span class="step-label">{label}</span>
              <span class="step-time">{i <= current && time ? formatTime(time) : ""}</span>
            </li>
          );
        })}
      </ol>

      {data.storing && !terminal ? (
        <StoringProgressView storing={data.storing} />
      ) : progress && progress.total > 0 ? (
        <div class="progress-block">
          <label for="shard-progress">Shards</label>
          <progress id="shard-progress" max={progress.total} value={progress.succeeded} />
          <p class="hint">
            {progress.succeeded} of {progress.total} done, {progress.active} running, {progress.failed} failed
          </p>
        </div>
      ) : null}

      {data.error ? <JobError error={data.error} /> : null}

      <dl class="details">
        <dt>Program</dt>
        <dd>{data.program}</dd>
        <dt>Database</dt>
        <dd>{data.db}</dd>
        <dt>Execution profile</dt>
        <dd>{data.execution_profile}</dd>
        <dt>Priority</dt>
        <dd>{data.priority ?? "normal"}</dd>
        <dt>Queries</dt>
        <dd>{data.query_count}</dd>
        <dt>Options</dt>
        <dd>
          {Object.keys(data.options).length === 0
            ? "BLAST defaults"
            : Object.entries(data.options)
                .map(([k, v]) => `${k} = ${String(v)}`)
                .join(", ")}
        </dd>
        <dt>Submitted</dt>
        <dd>
          {formatTime(data.created_at)} by {data.created_by.name || data.created_by.oid}
        </dd>
        <dt>Last update</dt>
        <dd>{formatTime(data.updated_at)}</dd>
        <dt>Job API id</dt>
        <dd>{data.openapi_job_id ?? "not assigned yet"}</dd>
      </dl>
      {!terminal ? <LiveText>Watching for changes…</LiveText> : <LiveText>{finishedSentence(data.status)}</LiveText>}

      {data.status === "completed" ? <Results api={api} job={data} /> : null}
      <p>
        <Link href="/blast/jobs">Back to all jobs</Link>
      </p>
    </section>
  );
}

/** The storing phase: BLAST has finished and the merged result is being written to storage. */
function StoringProgressView(props: { storing: NonNullable<JobView["storing"]> }) {
  const { storing } = props;
  const exact = storing.xml_bytes_total !== null && !storing.total_is_estimate;
  return (
    <div class="progress-block">
      <label for="storing-progress">Storing results</label>
      {exact ? (
        <progress id="storing-progress" max={storing.xml_bytes_total ?? 0} value={storing.xml_bytes} />
      ) : (
        <progress id="storing-progress" />
      )}
      <p class="hint">{storingSentence(storing)}</p>
    </div>
  );
}

/** A failure, with the memory pre-flight's remedies spelled out as actions. */
function JobError(props: { error: string }) {
  const preflight = props.error.startsWith(PREFLIGHT);
  const message = preflight ? props.error.split(" Remedies:")[0] : props.error;
  return (
    <div class="notice notice-error" role="alert">
      <p>
        <strong>The search failed:</strong> {message}
      </p>
      {preflight ? (
        <>
          <p>What you can do:</p>
          <ul>
            <li>
              <Link href="/blast/new">Submit the search again</Link> with the <strong>sharded</strong> execution
              profile, so each search needs only one partition's memory;
            </li>
            <li>
              recreate the cluster with a larger machine type (an Owner's task, in the workspace's cluster settings); or
            </li>
            <li>
              choose a smaller database (see <Link href="/databases">Databases</Link>).
            </li>
          </ul>
        </>
      ) : null}
    </div>
  );
}

/**
 * Saves one of the job's results as the browser's own download: a single-use link (asked for with
 * the caller's token; the token never goes into a URL) that the browser streams to disk, so a
 * multi-GB result never sits in the page's memory. No storage URL: the bytes pass through the API.
 */
function useDownload(api: ApiClient, job: JobView) {
  const [busy, setBusy] = useState<ResultContent | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const download = async (content: ResultContent) => {
    setBusy(content);
    setError(undefined);
    try {
      saveLink(await api.resultsLink(job.job_id, content), resultFileName(job, content));
    } catch (e) {
      setError(e instanceof ApiError && e.status === 404 ? new Error(`${String(e.detail)}`) : e);
    } finally {
      setBusy(undefined);
    }
  };
  return { busy, error, download };
}

/** The download buttons, with each download's size when it is known before downloading. */
function Downloads(props: { state: ReturnType<typeof useDownload>; resultBytes: JobView["result_bytes"] }) {
  const { busy, error, download } = props.state;
  return (
    <div class="downloads">
      <h3>Downloads</h3>
      <ul class="button-list">
        {DOWNLOADS.map((d) => (
          <li key={d.content}>
            <button type="button" disabled={busy !== undefined} onClick={() => void download(d.content)}>
              {busy === d.content ? "Preparing…" : `Download ${d.label}${sizeOf(d.content, props.resultBytes)}`}
            </button>
          </li>
        ))}
      </ul>
      <ErrorNotice error={error} title="The download failed:" />
    </div>
  );
}

/** The completed job's results: downloads, then the page-at-a-time results view. */
function Results(props: { api: ApiClient; job: JobView }) {
  const downloads = useDownload(props.api, props.job);
  return (
    <>
      <h2>Results</h2>
      <Downloads state={downloads} resultBytes={props.job.result_bytes} />
      <LazyResults
        api={props.api}
        uuid={props.job.job_id}
        fileBase={resultFileBase(props.job)}
        onDownloadXml={() => void downloads.download("xml")}
      />
    </>
  );
}

type ResultsViewProps = { api: ApiClient; uuid: string; fileBase: string; onDownloadXml: () => void };

/** The results view is its own chunk: the first load of the app stays small. */
function LazyResults(props: ResultsViewProps) {
  const [View, setView] = useState<ComponentType<ResultsViewProps> | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const mounted = useRef(true);
  useEffect(() => {
    mounted.current = true;
    import("../results/results-view.js").then(
      (m) => mounted.current && setView(() => m.default),
      (e: unknown) => mounted.current && setError(e),
    );
    return () => {
      mounted.current = false;
    };
  }, []);
  if (error) return <ErrorNotice error={error} title="The results view could not load:" />;
  return View ? (
    <View api={props.api} uuid={props.uuid} fileBase={props.fileBase} onDownloadXml={props.onDownloadXml} />
  ) : (
    <p class="loading">Loading the results view…</p>
  );
}
