import { useState } from "preact/hooks";
import type { Operation } from "../api.js";
import { formatBytes, formatCount, formatTime } from "../format.js";
import { addStepLines, warmupNodeLines } from "./database-words.js";
import {
  ErrorNotice,
  LiveText,
  PageTitle,
  StatusBadge,
  useApp,
  useAsync,
  useCan,
  usePolling,
  ScrollRegion,
} from "../ui.js";
import { DatabaseUpload } from "./database-upload.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
/** How often the list is re-read while a database warms up without an operation this page follows. */
const WARMING_POLL_MS = 5000;

const VERB: Record<Tracked["kind"], string> = { prepare: "Preparing", "warm-up": "Warming up", add: "Adding" };

interface Tracked {
  name: string;
  kind: "prepare" | "warm-up" | "add";
  operation: Operation;
}

/** Prepared BLAST databases: what each holds, whether it is warm, and prepare / warm-up. */
export function DatabasesPage() {
  const { api } = useApp();
  const canAct = useCan("Contributor");
  const list = useAsync((signal) => api.listDatabases(signal), []);
  const adding = useAsync((signal) => api.databaseAdding(signal), []);
  const prepare = adding.data?.prepare;
  const [tracked, setTracked] = useState<Tracked[]>([]);
  const [actionError, setActionError] = useState<unknown>(undefined);
  const running = tracked.filter((t) => !TERMINAL.has(t.operation.state));
  // A warm-up this page did not start (another tab, the console, a reload) still ends in the table.
  const warmingElsewhere = (list.data?.databases ?? []).some((d) => d.warm_state === "warming");
  const pollMs =
    running.length > 0
      ? Math.min(5000, Math.max(1000, ...running.map((t) => t.operation.poll_after_seconds * 1000)))
      : warmingElsewhere
        ? WARMING_POLL_MS
        : undefined;

  // Follow each started operation to its end, then refresh the list (warm state, versions).
  usePolling(async () => {
    if (running.length === 0) return list.reload();
    const next = await Promise.all(
      tracked.map(async (t) =>
        TERMINAL.has(t.operation.state) ? t : { ...t, operation: await api.operation(t.operation.operation_id) },
      ),
    );
    setTracked(next);
    if (next.some((t, i) => TERMINAL.has(t.operation.state) && !TERMINAL.has(tracked[i]?.operation.state ?? "")))
      list.reload();
  }, pollMs);

  const track = (name: string, kind: Tracked["kind"], operation: Operation) =>
    setTracked((t) => [{ name, kind, operation }, ...t.filter((x) => !(x.name === name && x.kind === kind))]);

  const start = async (name: string, kind: "prepare" | "warm-up") => {
    setActionError(undefined);
    try {
      const { operation } = kind === "prepare" ? await api.prepareDatabase(name) : await api.warmDatabase(name);
      track(name, kind, operation);
    } catch (error) {
      setActionError(error);
    }
  };

  const databases = list.data?.databases ?? [];
  return (
    <section>
      <PageTitle subtitle="Searches run against prepared databases. A warm database has its files cached on the cluster's nodes, so searches start faster.">
        Databases
      </PageTitle>
      <ErrorNotice error={list.error} title="Could not load the databases:" />
      <ErrorNotice error={actionError} title="Could not start:" />
      {tracked.length > 0 ? (
        <ul class="operations" aria-label="Operations">
          {tracked.map((t) => (
            <li key={t.operation.operation_id}>
              <StatusBadge status={t.operation.state} /> {VERB[t.kind]} <strong>{t.name}</strong>
              {t.operation.state === "failed" && t.operation.error ? (
                <span class="field-error"> — {t.operation.error.detail}</span>
              ) : null}
              <span class="muted"> · operation {t.operation.operation_id}</span>
              {t.kind === "add" && addStepLines(t.operation.progress).length > 0 ? (
                <ol class="hint" aria-label={`Steps adding ${t.name}`}>
                  {addStepLines(t.operation.progress).map((line) => (
                    <li key={line}>{line}</li>
                  ))}
                </ol>
              ) : null}
              {t.kind === "warm-up" && warmupNodeLines(t.operation.progress).length > 0 ? (
                <ul class="hint" aria-label={`Nodes warming ${t.name}`}>
                  {warmupNodeLines(t.operation.progress).map((line) => (
                    <li key={line}>{line}</li>
                  ))}
                </ul>
              ) : null}
            </li>
          ))}
        </ul>
      ) : null}
      {running.length > 0 ? <LiveText>Following {running.length} operation(s)…</LiveText> : null}
      {list.data && databases.length === 0 ? <p class="empty">No database is prepared yet.</p> : null}
      {canAct && prepare && !prepare.available && databases.length > 0 ? (
        <p class="notice" role="note" id="prepare-unavailable">
          <strong>Prepare is not available here.</strong> {prepare.reason}
        </p>
      ) : null}
      {databases.length > 0 ? (
        <ScrollRegion label="Databases">
          <table class="data-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Type</th>
                <th scope="col" class="num">
                  Size
                </th>
                <th scope="col" class="num">
                  Sequences
                </th>
                <th scope="col">Version</th>
                <th scope="col" class="num">
                  Partitions
                </th>
                <th scope="col">Warm state</th>
                <th scope="col">Update</th>
                {canAct ? (
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                ) : null}
              </tr>
            </thead>
            <tbody>
              {databases.map((d) => {
                const busy = running.some((t) => t.name === d.name);
                return (
                  <tr key={d.name}>
                    <th scope="row">{d.name}</th>
                    <td>{d.type === "nucl" ? "nucleotide" : "protein"}</td>
                    <td class="num">{formatBytes(d.bytes)}</td>
                    <td class="num">{formatCount(d.sequences)}</td>
                    <td>
                      <code>{d.version}</code>
                    </td>
                    <td class="num">{d.partitions}</td>
                    <td class="wrap">
                      <StatusBadge status={d.warm_state} />
                      {d.warmed_at ? <span class="muted small-block">since {formatTime(d.warmed_at)}</span> : null}
                    </td>
                    <td class="wrap">
                      {d.update_available ? (
                        <span>
                          <strong>available</strong> <code>{d.latest_release}</code>
                        </span>
                      ) : (
                        <span class="muted">
                          {d.checked_at ? `up to date (checked ${formatTime(d.checked_at)})` : "not checked"}
                        </span>
                      )}
                    </td>
                    {canAct ? (
                      <td class="actions-cell">
                        <button
                          type="button"
                          class="small"
                          disabled={busy}
                          onClick={() => void start(d.name, "warm-up")}
                          aria-label={`Warm up ${d.name}`}
                        >
                          Warm up
                        </button>{" "}
                        <button
                          type="button"
                          class="small"
                          disabled={busy || prepare?.available === false}
                          title={prepare && !prepare.available ? (prepare.reason ?? undefined) : undefined}
                          aria-describedby={prepare && !prepare.available ? "prepare-unavailable" : undefined}
                          onClick={() => void start(d.name, "prepare")}
                          aria-label={`${d.update_available ? "Update" : "Prepare"} ${d.name}`}
                        >
                          {d.update_available ? "Update" : "Prepare"}
                        </button>
                      </td>
                    ) : null}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </ScrollRegion>
      ) : null}
      {canAct ? (
        <DatabaseUpload adding={adding.data} onStarted={(name, operation) => track(name, "add", operation)} />
      ) : null}
    </section>
  );
}
