import { useState } from "preact/hooks";
import { type JobStatus, TERMINAL_STATUSES } from "../../../shared/jobs/model.js";
import type { JobListQuery, JobView } from "../api.js";
import { formatTime } from "../format.js";
import { STATUS_FILTER } from "./job-words.js";
import { Link } from "../router.js";
import {
  ErrorNotice,
  PageTitle,
  Pager,
  StatusBadge,
  useApp,
  useAsync,
  useCan,
  usePolling,
  ScrollRegion,
} from "../ui.js";

const PAGE_SIZE = 20;
/** Poll fast while something is moving, slowly otherwise (new jobs from elsewhere still appear). */
const ACTIVE_POLL_MS = 2000;
const IDLE_POLL_MS = 10_000;

/** The caller's searches, newest first, updating live; cancel from the list. */
export function JobsPage() {
  const { api } = useApp();
  const canSubmit = useCan("Contributor");
  const [status, setStatus] = useState("");
  const [page, setPage] = useState(1);
  const [updatedAt, setUpdatedAt] = useState<Date | undefined>(undefined);
  const [actionError, setActionError] = useState<unknown>(undefined);
  const list = useAsync(
    async (signal) => {
      const result = await api.listJobs(
        { page, page_size: PAGE_SIZE, status: (status || undefined) as JobListQuery["status"] },
        signal,
      );
      setUpdatedAt(new Date());
      return result;
    },
    [page, status],
  );
  const jobs = list.data?.jobs ?? [];
  const moving = jobs.some((j) => !isTerminal(j));
  usePolling(
    async () => {
      const fresh = await api.listJobs({
        page,
        page_size: PAGE_SIZE,
        status: (status || undefined) as JobListQuery["status"],
      });
      list.setData(fresh);
      setUpdatedAt(new Date());
    },
    moving ? ACTIVE_POLL_MS : IDLE_POLL_MS,
  );

  const pages = Math.max(1, Math.ceil((list.data?.total ?? 0) / PAGE_SIZE));
  return (
    <section>
      <PageTitle subtitle="Every search submitted from the dashboard. The list updates by itself while jobs run.">
        Jobs
      </PageTitle>
      <div class="toolbar">
        <div class="inline-field">
          <label for="status-filter">Status</label>
          <select
            id="status-filter"
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value);
              setPage(1);
            }}
          >
            <option value="">All</option>
            {STATUS_FILTER.map((s) => (
              <option key={s.status} value={s.status}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        {canSubmit ? (
          <Link href="/blast/new" class="button primary">
            New search
          </Link>
        ) : null}
      </div>
      <ErrorNotice error={list.error} />
      <ErrorNotice error={actionError} />
      {list.data && jobs.length === 0 ? (
        <p class="empty">
          {status ? `No ${status} searches.` : "No searches yet."}{" "}
          {canSubmit ? <Link href="/blast/new">Start a new search</Link> : null}
        </p>
      ) : null}
      {jobs.length > 0 ? (
        <ScrollRegion label="Jobs">
          <table class="data-table">
            <thead>
              <tr>
                <th scope="col">Search</th>
                <th scope="col">Program</th>
                <th scope="col">Database</th>
                <th scope="col">Status</th>
                <th scope="col">Shards</th>
                <th scope="col">Submitted</th>
                {canSubmit ? (
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                ) : null}
              </tr>
            </thead>
            <tbody>
              {jobs.map((job) => (
                <tr key={job.job_id}>
                  <td>
                    <Link href={`/blast/jobs/${job.job_id}`}>{jobTitle(job)}</Link>
                  </td>
                  <td>{job.program}</td>
                  <td>{job.db}</td>
                  <td>
                    <StatusBadge status={job.status} />
                  </td>
                  <td>
                    {job.progress && job.progress.total > 0 ? `${job.progress.succeeded}/${job.progress.total}` : "—"}
                  </td>
                  <td class="wrap">
                    {formatTime(job.created_at)}
                    <span class="muted small-block">by {job.created_by.name || job.created_by.oid}</span>
                  </td>
                  {canSubmit ? (
                    <td>
                      {isTerminal(job) ? null : (
                        <button
                          type="button"
                          class="small"
                          aria-label={`Cancel ${jobTitle(job)}`}
                          onClick={async () => {
                            setActionError(undefined);
                            try {
                              await api.cancelJob(job.job_id);
                              list.reload();
                            } catch (error) {
                              setActionError(error);
                            }
                          }}
                        >
                          Cancel
                        </button>
                      )}
                    </td>
                  ) : null}
                </tr>
              ))}
            </tbody>
          </table>
        </ScrollRegion>
      ) : null}
      {pages > 1 ? (
        <Pager label="Job pages" page={page} pages={pages} onPage={setPage}>
          Page {page} of {pages}
        </Pager>
      ) : null}
      {/* Not a live region: it changes every poll, which a screen reader would announce each time. */}
      {updatedAt ? <p class="live">Updated {updatedAt.toLocaleTimeString()}</p> : null}
    </section>
  );
}

/** A job's name in lists: its title, else its program, database and short id. */
export function jobTitle(job: JobView): string {
  return job.title || `${job.program} on ${job.db} · ${job.job_id.slice(0, 8)}`;
}

/** True once the job can change no more. */
export function isTerminal(job: JobView): boolean {
  return TERMINAL_STATUSES.has(job.status as JobStatus);
}
