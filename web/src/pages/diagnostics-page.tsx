import { useState } from "preact/hooks";
import { ErrorNotice, PageTitle, StatusBadge, useApi, useAsync, ScrollRegion } from "../ui.js";

/** How long the no-op round trip may take before the page gives up waiting (spec: "a few seconds"). */
const ROUND_TRIP_TIMEOUT_MS = 30_000;
const ROUND_TRIP_POLL_MS = 250;

/** Support's view: readiness, the task-queue diagnostics (spec §2.9) and the no-op round trip. */
export function DiagnosticsPage() {
  const { api } = useApi();
  const data = useAsync(async (signal) => {
    const [ready, queue] = await Promise.all([api.readiness(signal), api.queueDiagnostics(signal)]);
    return { ready, queue };
  }, []);
  const [message, setMessage] = useState("hello from the dashboard");
  const [trip, setTrip] = useState<{ state: string; detail: string } | undefined>(undefined);
  const [tripError, setTripError] = useState<unknown>(undefined);

  const roundTrip = async (event: Event) => {
    event.preventDefault();
    setTripError(undefined);
    const started = performance.now();
    try {
      const { task_id } = await api.enqueueNoop(message);
      setTrip({ state: "PENDING", detail: `task ${task_id} enqueued` });
      while (performance.now() - started < ROUND_TRIP_TIMEOUT_MS) {
        const result = await api.noopResult(task_id);
        if (result.status === "SUCCESS") {
          const same = result.result?.message === message;
          setTrip({
            state: "SUCCESS",
            detail: `round trip in ${Math.round(performance.now() - started)} ms; the message came back ${same ? "unchanged" : `changed: ${JSON.stringify(result.result?.message)}`}`,
          });
          data.reload();
          return;
        }
        if (result.status === "FAILURE" || result.status === "REVOKED") {
          setTrip({ state: result.status, detail: result.error ?? "the task did not complete" });
          return;
        }
        setTrip({ state: result.status, detail: `task ${task_id}` });
        await new Promise((r) => setTimeout(r, ROUND_TRIP_POLL_MS));
      }
      setTrip({ state: "TIMEOUT", detail: `no answer within ${ROUND_TRIP_TIMEOUT_MS / 1000} s` });
    } catch (error) {
      setTrip(undefined);
      setTripError(error);
    }
  };

  const q = data.data?.queue;
  const idsEqual = q ? q.task_app_id === q.celery_app_id && q.celery_app_id === q.current_app_id : false;
  return (
    <section>
      <PageTitle subtitle="For support: whether the service is ready, what is queued, and a round trip through the background work.">
        Diagnostics
      </PageTitle>
      <div class="toolbar">
        <button type="button" onClick={data.reload}>
          Refresh
        </button>
      </div>
      <ErrorNotice error={data.error} />
      {data.data ? (
        <>
          <h2>Readiness</h2>
          <p>
            <StatusBadge status={data.data.ready.ready ? "succeeded" : "failed"} />{" "}
            {data.data.ready.ready ? "The service is ready." : data.data.ready.detail}
          </p>
        </>
      ) : null}
      {q ? (
        <>
          <h2>Task queues</h2>
          <dl class="details">
            <dt>Application ids</dt>
            <dd>
              {q.task_app_id} / {q.celery_app_id} / {q.current_app_id}{" "}
              {idsEqual ? "(equal, as they must be)" : "(NOT equal: misconfigured)"}
            </dd>
            <dt>Application</dt>
            <dd>
              <code>{q.task_app_main}</code>
            </dd>
            <dt>Default queue</dt>
            <dd>{q.task_app_default_queue}</dd>
            <dt>No-op route</dt>
            <dd>{q.resolved_route.queue}</dd>
            <dt>Orphaned messages</dt>
            <dd>{q.redis_keys_db0.length === 0 ? "none" : q.redis_keys_db0.join(", ")}</dd>
          </dl>
          <ScrollRegion label="Queue depths">
            <table class="data-table narrow">
              <caption>Work waiting or running, per queue</caption>
              <thead>
                <tr>
                  <th scope="col">Queue</th>
                  <th scope="col" class="num">
                    Depth
                  </th>
                </tr>
              </thead>
              <tbody>
                {Object.entries(q.queues).map(([name, depth]) => (
                  <tr key={name}>
                    <th scope="row">{name}</th>
                    <td class="num">{depth}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </ScrollRegion>
        </>
      ) : null}
      <h2>No-op round trip</h2>
      <form class="form inline-form" onSubmit={roundTrip}>
        <div class="field">
          <label for="noop-message">Message</label>
          <input
            id="noop-message"
            type="text"
            maxLength={1024}
            value={message}
            onInput={(e) => setMessage(e.currentTarget.value)}
            required
          />
        </div>
        <button type="submit">Run the round trip</button>
      </form>
      <p class="live" role="status">
        {trip ? (
          <>
            <StatusBadge status={trip.state} /> {trip.detail}
          </>
        ) : null}
      </p>
      <ErrorNotice error={tripError} />
    </section>
  );
}
