import { useEffect, useState } from "preact/hooks";
import { ApiError, type Operation } from "../api.js";
import { formatBytes } from "../format.js";
import { Link } from "../router.js";
import { ErrorNotice, LiveText, PageTitle, StatusBadge, useApp, useAsync, useCan, usePolling } from "../ui.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const DIGEST = /^sha256:[0-9a-f]{64}$/;
/** The role floor of provisioning, builds and deploys (functions/aks.ts, functions/cluster.ts). */
const ACTION_ROLE = "Contributor";
/** How often the job API's deployment is re-read while one exists. */
const DEPLOYMENT_POLL_MS = 3000;

type StepState = "done" | "missing" | "unknown" | "in progress" | "stopped";

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
 * Follows one operation (spec §2.7): the one an action started, else the latest the backend
 * reports; polls it until terminal, then calls `onEnd` (the page re-reads what it changed).
 */
function useOperation(reported: Operation | null | undefined, onEnd: () => void) {
  const { api } = useApp();
  const [started, setStarted] = useState<Operation | undefined>(undefined);
  const current = started ?? reported ?? undefined;
  const following = current !== undefined && !TERMINAL.has(current.state);
  usePolling(
    async () => {
      if (!current) return;
      const next = await api.operation(current.operation_id);
      setStarted(next);
      if (TERMINAL.has(next.state)) onEnd();
    },
    following ? Math.min(5000, Math.max(1000, current.poll_after_seconds * 1000)) : undefined,
  );
  return { current, following, setStarted };
}

/** An action's button for roles at its floor; for others the reason, in a sentence. */
function Action(props: {
  allowed: boolean;
  label: string;
  what: string;
  blocked?: string | undefined;
  busy: boolean;
  onClick: () => void;
}) {
  if (!props.allowed) return <p class="muted">{`${props.what} needs the ${ACTION_ROLE} role.`}</p>;
  return (
    <p>
      <button type="button" disabled={props.blocked !== undefined || props.busy} onClick={props.onClick}>
        {props.label}
      </button>
      {props.blocked ? <span class="muted"> {props.blocked}</span> : null}
    </p>
  );
}

type ClusterProgress = {
  steps?: { name: string; state: string; error?: string; assignments?: { role: string; state: string }[] }[];
  cluster?: { power_state?: string | null; blast_pool?: { vm_size: string | null; count: number | null } | null };
};
type BuildProgress = {
  step?: string;
  run_id?: string;
  run_status?: string;
  log_tail?: string;
  image_digest?: string;
  image?: string;
};

/**
 * The prerequisites of spec §1 as a checklist, each step's live state read from the backend, and
 * the whole path to a running job API from here: provision the cluster (the pools the backend
 * plans from the workspace and the databases' memory needs), build the job API image (the run's
 * log and the digest), deploy it (that digest preselected), each action's operation followed to
 * its end. Actions show for the role the backend enforces; other roles see why not. Steps another
 * page owns link to it.
 */
export function ClusterPage() {
  const { api } = useApp();
  const canAct = useCan(ACTION_ROLE);
  const workspace = useAsync((signal) => optional(api.getWorkspace(signal)), []);
  const cluster = useAsync((signal) => optional(api.clusterStatus(signal)), []);
  const build = useAsync((signal) => optional(api.latestImageBuild(signal)), []);
  const deployment = useAsync((signal) => optional(api.jobApiDeployment(signal)), []);
  const token = useAsync((signal) => optional(api.apiTokenStatus(signal)), []);
  const databases = useAsync((signal) => optional(api.listDatabases(signal)), []);
  const [digest, setDigest] = useState("");
  const [digestEdited, setDigestEdited] = useState(false);
  const [force, setForce] = useState(false);
  const [errors, setErrors] = useState<{ provision?: unknown; build?: unknown; deploy?: unknown }>({});

  const clusterOp = useOperation(cluster.data?.operation, () => {
    cluster.reload();
    deployment.reload();
  });
  const buildOp = useOperation(build.data?.operation, () => build.reload());
  const deployOp = useOperation(deployment.data?.running_operation, () => deployment.reload());

  const buildProgress = buildOp.current?.progress as BuildProgress | undefined;
  const builtDigest =
    buildOp.current?.state === "succeeded" && buildProgress?.image_digest && DIGEST.test(buildProgress.image_digest)
      ? buildProgress.image_digest
      : undefined;
  // The digest the last build produced is what a deploy takes, unless the person typed another.
  useEffect(() => {
    if (builtDigest && !digestEdited) setDigest(builtDigest);
  }, [builtDigest, digestEdited]);

  const act = (key: "provision" | "build" | "deploy", run: () => Promise<{ operation: Operation }>) => async () => {
    setErrors((e) => ({ ...e, [key]: undefined }));
    try {
      const { operation } = await run();
      (key === "provision" ? clusterOp : key === "build" ? buildOp : deployOp).setStarted(operation);
    } catch (error) {
      setErrors((e) => ({ ...e, [key]: error }));
    }
  };

  const saved = workspace.data !== undefined;
  const noWorkspace = workspace.loading ? "" : saved ? undefined : "Save the workspace configuration first.";
  const status = cluster.data;
  const actual = status?.cluster ?? null;
  const clusterRunning = actual?.power_state === "Running" && actual.provisioning_state === "Succeeded";
  const clusterState: StepState = clusterOp.following
    ? "in progress"
    : clusterRunning
      ? "done"
      : actual?.power_state === "Stopped"
        ? "stopped"
        : status && !status.cluster_error
          ? "missing"
          : "unknown";
  const clusterProgress = clusterOp.current?.progress as ClusterProgress | undefined;
  const rollout = deployment.data?.rollout;
  // A deployed job API's state changes without an operation (a pod becomes ready, crashes, is
  // rescheduled): re-read it while it is there and no deploy is being followed.
  usePolling(
    async () => deployment.reload(),
    rollout && rollout.state !== "missing" && !deployOp.following ? DEPLOYMENT_POLL_MS : undefined,
  );
  const warm = (databases.data?.databases ?? []).filter((d) => d.warm_state === "warm");
  const deployProgress = deployOp.current?.progress as { step?: string } | undefined;
  const validDigest = DIGEST.test(digest.trim());
  const buildState: StepState = buildOp.following
    ? "in progress"
    : builtDigest
      ? "done"
      : saved
        ? "missing"
        : "unknown";
  return (
    <section>
      <PageTitle subtitle="What the job API needs before the first search, in order. Each step shows its state as the backend reports it now.">
        Cluster
      </PageTitle>
      <ErrorNotice
        error={workspace.error ?? cluster.error ?? build.error ?? deployment.error ?? token.error ?? databases.error}
        title="Could not read:"
      />
      <ol class="checklist" aria-label="Prerequisites">
        <Step n={1} title="Workspace saved" state={saved ? "done" : workspace.loading ? "unknown" : "missing"}>
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
        <Step n={2} title="Cluster running" state={clusterState}>
          {status ? (
            <>
              <p>
                A provision of <code>{status.cluster_name}</code> asks for:
              </p>
              <ul aria-label="Node pools">
                {status.plan.pools.map((pool) => (
                  <li key={pool.name}>
                    {pool.name === "blast" ? "BLAST pool" : "System pool"}: {pool.node_count} ×{" "}
                    <code>{pool.vm_size}</code>
                    {pool.memory_gib !== null ? ` (${pool.memory_gib} GiB, ${pool.vcpus} vCPUs each)` : ""}
                  </li>
                ))}
              </ul>
              <p>
                {status.plan.largest_database
                  ? `The largest prepared database, ${status.plan.largest_database.name}, needs ${formatBytes(status.plan.largest_database.bytes_to_cache)} in memory${
                      status.plan.usable_bytes_per_node !== null
                        ? `; a BLAST node leaves ${formatBytes(status.plan.usable_bytes_per_node)} to searches`
                        : ""
                    }.`
                  : "No database is prepared yet: the BLAST pool's size is the workspace's."}
              </p>
              {status.plan.detail ? <p class="field-error">{status.plan.detail}</p> : null}
              <p>
                {actual
                  ? `The cluster is ${actual.power_state === "Stopped" ? "stopped" : (actual.power_state ?? "in an unknown power state").toLowerCase()} (provisioning ${actual.provisioning_state ?? "unknown"})${
                      actual.blast_pool
                        ? `; its BLAST pool has ${actual.blast_pool.count} × ${actual.blast_pool.vm_size}`
                        : "; it has no BLAST pool yet"
                    }.`
                  : status.cluster_error
                    ? `${status.cluster_error}.`
                    : "The cluster does not exist yet."}
              </p>
            </>
          ) : (
            <p>{cluster.loading ? "Reading the cluster…" : "Save the workspace to plan the cluster."}</p>
          )}
          <Action
            allowed={canAct}
            what="Provisioning the cluster"
            label={actual ? "Update the cluster" : "Provision the cluster"}
            blocked={
              noWorkspace ?? (status && !status.plan.fits ? "The BLAST pool is too small (see above)." : undefined)
            }
            busy={clusterOp.following}
            onClick={act("provision", api.provisionCluster)}
          />
          {canAct && actual && !clusterOp.following ? (
            <p>
              <button
                type="button"
                class="secondary"
                onClick={act("provision", () => api.clusterAction(clusterRunning ? "stop" : "start"))}
              >
                {clusterRunning ? "Stop the cluster" : "Start the cluster"}
              </button>
            </p>
          ) : null}
          <ErrorNotice error={errors.provision} title="Could not provision:" />
          {clusterOp.current ? (
            <section class="operation" aria-label="Cluster operation">
              <p>
                <StatusBadge status={clusterOp.current.state} /> {clusterOp.current.operation_type}{" "}
                <span class="muted">operation {clusterOp.current.operation_id}</span>
              </p>
              {clusterProgress?.steps ? (
                <ol aria-label="Cluster steps">
                  {clusterProgress.steps.map((s) => (
                    <li key={s.name}>
                      {s.name.replace("_", " ")}: <StatusBadge status={s.state} />
                      {s.error ? <span class="field-error"> {s.error}</span> : null}
                      {s.assignments?.some((a) => a.state === "missing") ? (
                        <span class="muted">
                          {" "}
                          {s.assignments.filter((a) => a.state === "missing").length} role assignment(s) could not be
                          made: run the commands the operation lists.
                        </span>
                      ) : null}
                    </li>
                  ))}
                </ol>
              ) : null}
              {clusterOp.current.state === "failed" && clusterOp.current.error ? (
                <p class="field-error">{clusterOp.current.error.detail}</p>
              ) : null}
              {clusterOp.following ? <LiveText>Following the cluster operation…</LiveText> : null}
            </section>
          ) : null}
        </Step>
        <Step n={3} title="Job API image present in the registry" state={buildState}>
          <p>
            The job API image is built in the workspace's registry and deployed by its digest (never a tag).
            {builtDigest ? (
              <>
                {" "}
                Built: <code>{buildProgress?.image ?? builtDigest}</code>.
              </>
            ) : null}
          </p>
          <Action
            allowed={canAct}
            what="Building the image"
            label="Build the job API image"
            blocked={noWorkspace}
            busy={buildOp.following}
            onClick={act("build", api.buildImages)}
          />
          <ErrorNotice error={errors.build} title="Could not build:" />
          {buildOp.current ? (
            <section class="operation" aria-label="Build operation">
              <p>
                <StatusBadge status={buildOp.current.state} /> Build{" "}
                <span class="muted">operation {buildOp.current.operation_id}</span>
                {buildProgress?.step ? <span> · step {buildProgress.step}</span> : null}
                {buildProgress?.run_id ? (
                  <span>
                    {" "}
                    · run {buildProgress.run_id} {buildProgress.run_status ?? ""}
                  </span>
                ) : null}
              </p>
              {buildProgress?.log_tail ? (
                <pre class="log" role="log" aria-label="Build log">
                  {buildProgress.log_tail}
                </pre>
              ) : null}
              {buildOp.current.state === "failed" && buildOp.current.error ? (
                <p class="field-error">{buildOp.current.error.detail}</p>
              ) : null}
              {buildOp.following ? <LiveText>Following the build…</LiveText> : null}
            </section>
          ) : null}
        </Step>
        <Step
          n={4}
          title="Job API deployed"
          state={
            deployOp.following
              ? "in progress"
              : rollout?.state === "complete"
                ? "done"
                : rollout
                  ? "missing"
                  : "unknown"
          }
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
          {canAct ? (
            <form
              class="inline-form"
              onSubmit={(event) => {
                event.preventDefault();
                void act("deploy", () => api.deployJobApi({ image_digest: digest.trim(), force }))();
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
                onInput={(e) => {
                  setDigestEdited(true);
                  setDigest((e.target as HTMLInputElement).value);
                }}
              />
              <label>
                <input
                  type="checkbox"
                  checked={force}
                  onChange={(e) => setForce((e.target as HTMLInputElement).checked)}
                />{" "}
                Take over fields changed by hand (force)
              </label>
              <button type="submit" disabled={!validDigest || deployOp.following}>
                Deploy the job API
              </button>
              {!validDigest ? <span class="muted"> Build the image (or paste its sha256 digest) first.</span> : null}
            </form>
          ) : (
            <p class="muted">{`Deploying needs the ${ACTION_ROLE} role.`}</p>
          )}
          <ErrorNotice error={errors.deploy} title="Could not deploy:" />
          {deployOp.current ? (
            <section class="operation" aria-label="Deploy operation">
              <p>
                <StatusBadge status={deployOp.current.state} /> Deploy{" "}
                <span class="muted">operation {deployOp.current.operation_id}</span>
                {deployProgress?.step ? <span> · step {deployProgress.step}</span> : null}
              </p>
              {deployOp.current.state === "failed" && deployOp.current.error ? (
                <p class="field-error">{deployOp.current.error.detail}</p>
              ) : null}
              {deployOp.following ? <LiveText>Following the deploy…</LiveText> : null}
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
