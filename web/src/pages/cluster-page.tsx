import { useState } from "preact/hooks";
import { ApiError, type Operation } from "../api.js";
import { Link } from "../router.js";
import { ErrorNotice, LiveText, PageTitle, StatusBadge, useApp, useAsync, useCan, usePolling } from "../ui.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const DIGEST = /^sha256:[0-9a-f]{64}$/;

type StepState = "done" | "missing" | "unknown" | "in progress";

/** A read that a 404 (nothing saved) or a 503 (not configured) answers as "not there" rather than as an error. */
async function optional<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 503)) return undefined;
    throw error;
  }
}

function Step(props: { n: number; title: string; state: StepState; children?: preact.ComponentChildren }) {
  return (
    <li class="checklist-step" data-state={props.state}>
      <h2 class="checklist-title">
        {props.n}. {props.title} <StatusBadge status={props.state} />
      </h2>
      {props.children}
    </li>
  );
}

/**
 * The prerequisites of spec §1 as a checklist, each step's live state read from the backend, and
 * the actions this page drives (the job API deploy, with its operation's progress and the pods'
 * reasons). Steps another page owns link to it.
 */
export function ClusterPage() {
  const { api } = useApp();
  const canDeploy = useCan("Contributor");
  const workspace = useAsync((signal) => optional(api.getWorkspace(signal)), []);
  const deployment = useAsync((signal) => optional(api.jobApiDeployment(signal)), []);
  const token = useAsync((signal) => optional(api.apiTokenStatus(signal)), []);
  const databases = useAsync((signal) => optional(api.listDatabases(signal)), []);
  const [digest, setDigest] = useState("");
  const [force, setForce] = useState(false);
  const [operation, setOperation] = useState<Operation | undefined>(undefined);
  const [actionError, setActionError] = useState<unknown>(undefined);

  const current = operation ?? deployment.data?.running_operation ?? undefined;
  const following = current !== undefined && !TERMINAL.has(current.state);
  usePolling(
    async () => {
      if (!current) return;
      const next = await api.operation(current.operation_id);
      setOperation(next);
      if (TERMINAL.has(next.state)) deployment.reload();
    },
    following ? Math.min(5000, Math.max(1000, current.poll_after_seconds * 1000)) : undefined,
  );

  const deploy = async () => {
    setActionError(undefined);
    try {
      const { operation: started } = await api.deployJobApi({ image_digest: digest.trim(), force });
      setOperation(started);
    } catch (error) {
      setActionError(error);
    }
  };

  const rollout = deployment.data?.rollout;
  const warm = (databases.data?.databases ?? []).filter((d) => d.warm_state === "warm");
  const progress = current?.progress as
    | { step?: string; rollout?: { pods?: { name: string; phase: string; reason?: string; message?: string }[] } }
    | undefined;
  const validDigest = DIGEST.test(digest.trim());
  return (
    <section>
      <PageTitle subtitle="What the job API needs before the first search, in order. Each step shows its state as the backend reports it now.">
        Cluster
      </PageTitle>
      <ErrorNotice
        error={workspace.error ?? deployment.error ?? token.error ?? databases.error}
        title="Could not read:"
      />
      <ol class="checklist" aria-label="Prerequisites">
        <Step n={1} title="Workspace saved" state={workspace.data ? "done" : workspace.loading ? "unknown" : "missing"}>
          <p>
            {workspace.data ? (
              <>
                Registry <code>{String(workspace.data.body.workspace.registry)}</code>, storage account{" "}
                <code>{String(workspace.data.body.workspace.storage_account)}</code>.
              </>
            ) : (
              "No workspace configuration is saved."
            )}{" "}
            <Link href="/workspace">Workspace settings</Link>
          </p>
        </Step>
        <Step n={2} title="Cluster running" state={deployment.data ? "done" : "unknown"}>
          <p>
            {deployment.data
              ? `The cluster's API server answers (namespace ${deployment.data.namespace}).`
              : "No cluster is configured, or its API server does not answer."}
          </p>
        </Step>
        <Step n={3} title="Job API image present in the registry" state={validDigest ? "done" : "unknown"}>
          <p>The job API is deployed by its image digest (never a tag). Paste the digest the image build reported.</p>
        </Step>
        <Step
          n={4}
          title="Job API deployed"
          state={following ? "in progress" : rollout?.state === "complete" ? "done" : rollout ? "missing" : "unknown"}
        >
          {rollout ? (
            <p>
              {rollout.state === "missing"
                ? "Not deployed yet."
                : `${rollout.available_replicas} of ${rollout.replicas} replicas available (generation ${rollout.observed_generation} of ${rollout.generation}).`}
            </p>
          ) : null}
          {rollout && rollout.pods.length > 0 ? (
            <ul class="pod-list" aria-label="Job API pods">
              {rollout.pods.map((p) => (
                <li key={p.name}>
                  <code>{p.name}</code> <StatusBadge status={p.ready ? "ready" : p.phase} />
                  {p.reason ? (
                    <span class="field-error">
                      {" "}
                      {p.reason}
                      {p.message ? `: ${p.message}` : ""}
                    </span>
                  ) : null}
                </li>
              ))}
            </ul>
          ) : null}
          {canDeploy ? (
            <form
              class="inline-form"
              onSubmit={(event) => {
                event.preventDefault();
                void deploy();
              }}
            >
              <label for="image-digest">Image digest</label>
              <input
                id="image-digest"
                name="image_digest"
                value={digest}
                placeholder="sha256:…"
                spellcheck={false}
                autocomplete="off"
                onInput={(e) => setDigest((e.target as HTMLInputElement).value)}
              />
              <label>
                <input
                  type="checkbox"
                  checked={force}
                  onChange={(e) => setForce((e.target as HTMLInputElement).checked)}
                />{" "}
                Take over fields changed by hand (force)
              </label>
              <button type="submit" disabled={!validDigest || following}>
                Deploy the job API
              </button>
            </form>
          ) : (
            <p class="muted">Deploying needs the Contributor role.</p>
          )}
          <ErrorNotice error={actionError} title="Could not deploy:" />
          {current ? (
            <section class="operation" aria-label="Deploy operation">
              <p>
                <StatusBadge status={current.state} /> Deploy{" "}
                <span class="muted">operation {current.operation_id}</span>
                {progress?.step ? <span> · step {progress.step}</span> : null}
              </p>
              {current.state === "failed" && current.error ? <p class="field-error">{current.error.detail}</p> : null}
              {following ? <LiveText>Following the deploy…</LiveText> : null}
            </section>
          ) : null}
        </Step>
        <Step
          n={5}
          title="API token configured"
          state={token.data?.configured ? "done" : token.data ? "missing" : "unknown"}
        >
          <p>
            {token.data?.configured ? `Ends in …${token.data.last_four}.` : "No token yet."}{" "}
            <Link href="/settings/api-token">API token</Link>
          </p>
        </Step>
        <Step
          n={6}
          title="BLAST database prepared and warm"
          state={warm.length > 0 ? "done" : databases.data ? "missing" : "unknown"}
        >
          <p>
            {warm.length > 0 ? `Warm: ${warm.map((d) => d.name).join(", ")}.` : "No warm database."}{" "}
            <Link href="/databases">Databases</Link>
          </p>
        </Step>
      </ol>
    </section>
  );
}
