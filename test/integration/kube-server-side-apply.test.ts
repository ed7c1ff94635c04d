import { execFile } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { AppsV1Api, CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { azureStandIns } from "../../local/kube/azure-stand-ins.js";
import { kubeFetch, serviceProxyUrl } from "../../shared/cluster/deployed-job-api.js";
import { BLAST_POOL, blastPoolNodes, type LocalCluster, startLocalCluster } from "../../local/kube/cluster.js";
import {
  ApplyConflictError,
  applyManifests,
  readRollout,
  rolloutFailure,
} from "../../shared/cluster/job-api-deploy.js";
import {
  deploymentOf,
  type JobApiValues,
  jobApiServiceAccountName,
  renderJobApiManifests,
} from "../../shared/cluster/job-api-manifests.js";
import { createLogger } from "../../shared/logging/logger.js";
import { API_TOKEN_SECRET } from "../../shared/secrets/api-tokens.js";
import { eventually } from "../support/local-stack.js";

const run = promisify(execFile);
const AZURITE =
  "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;";
const MiB = 1024 ** 2;
/** A bound on waiting for the controllers and the kubelet (the machine is shared; this is not a timing assertion). */
const SETTLE_MS = 60_000;
const digest = (c: string) => `sha256:${c.repeat(64)}`;
/**
 * The digest the local kubelet maps to a process that stays up; `b…` to one that exits 3; `d…` to
 * one that serves but never answers its readiness probe 200; anything else is not pullable.
 */
const RUNS = digest("a");
const CRASHES = digest("b");
const NEVER_READY = digest("d");
/**
 * `e…`: a process that prints its env and answers 200 on every path of the port `APP_PORT` names
 * (with the path; on `/headers` with the request's headers as JSON).
 */
const ECHO = digest("e");
/** The namespaces this file deploys the job API into: the stand-ins' job API namespaces. */
const JOB_API_NAMESPACES = [
  "bp-one",
  "bp-unready",
  "bp-two",
  "bp-pull",
  "bp-crash",
  "bp-nowhere",
  "bp-roll",
  "bp-term",
];
/** `f…`: the job API stand-in, with a terminal daemon stand-in at the image's `dist/jobapi/terminal-daemon.js`. */
const WITH_TERMINAL = digest("f");
/**
 * A stand-in for the terminal daemon: exits 2 the first time it starts in a pod (a count kept in
 * its HOME, the pod's emptyDir), then says what it was given and listens on its port. Before that
 * first exit it tries what a hostile container would: to put a symlink to the host file `VICTIM`
 * in the place of its token file in its secret volume (`TOKEN_DIR`), and in the place of the
 * token the kubelet once wrote next to its HOME's folder (`volumes/<volume>`), for the kubelet to
 * write through as root when the container starts again.
 */
const TERMINAL_STAND_IN = `
const fs = require("node:fs"); const path = require("node:path"); const e = process.env; const count = e.HOME + "/starts";
const n = (fs.existsSync(count) ? Number(fs.readFileSync(count, "utf8")) : 0) + 1; fs.writeFileSync(count, String(n));
const plant = (where, dir) => { try { fs.mkdirSync(dir, { recursive: true }); fs.rmSync(path.join(dir, "token"), { force: true });
  fs.symlinkSync(e.VICTIM, path.join(dir, "token")); console.error("plant " + where + " ok"); }
  catch (error) { console.error("plant " + where + " " + error.code); } };
if (n === 1) { plant("mounted", e.TOKEN_DIR); plant("old", path.join(path.dirname(e.HOME), "terminal-token"));
  console.error("first start fails " + e.TOKEN_DIR); process.exit(2); }
console.log("terminal " + JSON.stringify({ port: e.JOBAPI_TERMINAL_DAEMON_PORT, home: e.HOME,
  kubeconfig: e.KUBECONFIG ?? null, storage: e.JOBAPI_STORAGE_CONNECTION_STRING ?? null,
  tokenDir: e.TOKEN_DIR, token: fs.readFileSync(path.join(e.TOKEN_DIR, "token"), "utf8") }));
require("node:net").createServer((c) => c.end()).listen(Number(e.JOBAPI_TERMINAL_DAEMON_PORT), "127.0.0.1");
`;
const FIRST_TOKEN = '{"current":{"value":"first"}}';

/**
 * A stand-in for the job API: says at start what it was given, serves `/v1/ready` on the port its
 * env names (200 once the token store holds the API token, as the job API's readiness asks), and
 * says each token it reads (the dashboard's rotations reach it). Given `VICTIM` (a host file) and
 * `VICTIM_DIR` (a host folder) it first tries what a hostile container would, at each start: to put
 * symlinks to them in the place of the kubeconfig and of the token's folder the node supplied it,
 * for the kubelet to write or chown through as root at its next start or the next rotation; and
 * its first start fails (exit 2), so that there is a next start.
 */
const STAND_IN = `
const fs = require("node:fs"); const path = require("node:path"); const e = process.env;
if (e.VICTIM) { const count = e.HOME + "/jobapi-starts";
  const n = (fs.existsSync(count) ? Number(fs.readFileSync(count, "utf8")) : 0) + 1; fs.writeFileSync(count, String(n));
  const plant = (what, file, target) => { try { fs.rmSync(file, { recursive: true, force: true }); fs.symlinkSync(target, file);
    console.error("plant " + what + " " + n + " ok"); } catch (error) { console.error("plant " + what + " " + n + " " + error.code); } };
  console.error("node " + n + " " + path.dirname(e.KUBECONFIG));
  plant("kubeconfig", e.KUBECONFIG, e.VICTIM); plant("secrets", e.JOBAPI_SECRETS_DIR, e.VICTIM_DIR);
  if (n === 1) { console.error("first start fails " + path.dirname(e.KUBECONFIG)); process.exit(2); } }
const readable = (f) => { try { fs.readFileSync(f); return true; } catch { return false; } };
const token = () => { try { return fs.readFileSync(e.JOBAPI_SECRETS_DIR + "/jobapi-api-token", "utf8"); } catch { return ""; } };
console.log("given " + JSON.stringify({ port: e.JOBAPI_PORT, host: e.JOBAPI_HOST, storage: e.JOBAPI_STORAGE_CONNECTION_STRING,
  account: e.JOBAPI_STORAGE_ACCOUNT_NAME ?? null, vault: e.JOBAPI_KEY_VAULT_URL ?? null, discovery: e.JOBAPI_AUTH_DISCOVERY_URL,
  kubeconfig: readable(e.KUBECONFIG), secrets: fs.readdirSync(e.JOBAPI_SECRETS_DIR), uid: process.getuid() }));
let last = ""; setInterval(() => { const t = token(); if (t !== last) { last = t; console.log("token " + t); } }, 100);
require("node:http").createServer((q, s) => { s.statusCode = q.url === "/v1/ready" && token() ? 200 : 503; s.end(); })
  .listen(Number(e.JOBAPI_PORT), e.JOBAPI_HOST);`;

const values = (namespace: string, image_digest: string): JobApiValues => ({
  namespace,
  registry: "blastplanelocal.azurecr.io",
  image_digest,
  workload_identity_client_id: "22222222-2222-4222-8222-222222222222",
  key_vault_url: "https://blastplane-kv.vault.azure.net/",
  storage_account_name: "blastplanedata",
  app_subnet_cidr: "10.1.0.0/24",
  auth_client_id: "00000000-0000-4000-8000-000000000001",
  auth_tenant_id: "00000000-0000-4000-8000-000000000000",
  // No origin may open the browser terminal, so its daemon is not deployed (the two-container pod:
  // the test "the job API's pod with the terminal's container" below).
  web_app_origin: "",
});

describe("server-side apply on the local Kubernetes API, and the job API's rollout", { timeout: 120_000 }, () => {
  let cluster: LocalCluster;
  let dataDir: string;
  let tokenStoreDir: string;
  let imageDir: string;
  let kc: KubeConfig;
  const replicasOf = (namespace: string) =>
    (cluster.store.get("deployments", namespace, "blastplane-jobapi")?.spec as { replicas?: number } | undefined)
      ?.replicas;
  const kubectl = async (namespace: string, ...args: string[]) =>
    (await run("kubectl", ["--kubeconfig", cluster.kubeconfigPath, "-n", namespace, ...args])).stdout;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), "bp-ssa-"));
    // The stack's token store (0700, the kubelet's user alone), holding the API token.
    tokenStoreDir = path.join(dataDir, "secrets");
    mkdirSync(tokenStoreDir, { mode: 0o700 });
    writeFileSync(path.join(tokenStoreDir, API_TOKEN_SECRET), FIRST_TOKEN, { mode: 0o600 });
    writeFileSync(path.join(tokenStoreDir, "other-secret"), "not for the pod", { mode: 0o600 });
    // The image of WITH_TERMINAL: open to the pod's user (uid 1000 under root's kubelet).
    imageDir = mkdtempSync(path.join(tmpdir(), "bp-ssa-image-"));
    mkdirSync(path.join(imageDir, "dist", "jobapi"), { recursive: true, mode: 0o755 });
    writeFileSync(path.join(imageDir, "dist", "jobapi", "terminal-daemon.js"), TERMINAL_STAND_IN, { mode: 0o644 });
    for (const dir of [imageDir, path.join(imageDir, "dist"), path.join(imageDir, "dist", "jobapi")])
      chmodSync(dir, 0o755);
    const standIns = azureStandIns({
      namespaces: JOB_API_NAMESPACES,
      serviceAccountName: jobApiServiceAccountName(),
      storageConnectionString: AZURITE,
      tokenStoreDir,
      secretNames: [API_TOKEN_SECRET],
      identityDiscoveryUrl: "http://127.0.0.1:1/tenant/v2.0/.well-known/openid-configuration",
      kubeconfig: () => readFileSync(cluster.kubeconfigPath, "utf8"),
    });
    cluster = await startLocalCluster({
      logger: createLogger({ level: "warn" }),
      dataDir,
      // Room for every namespace's job API pod (1 GiB, 500m each): the rollouts must not compete for the node.
      nodes: blastPoolNodes(1, 16 * 1024 * MiB, 8),
      // The job API's pod runs as uid 1000 (root's kubelet switches to it): its working folder is one it may enter.
      images: [
        { pattern: new RegExp(`@${RUNS}$`), workingDir: tmpdir(), cmd: ["node", "-e", STAND_IN] },
        { pattern: new RegExp(`@${WITH_TERMINAL}$`), workingDir: imageDir, cmd: ["node", "-e", STAND_IN] },
        {
          pattern: new RegExp(`@${NEVER_READY}$`),
          workingDir: tmpdir(),
          cmd: [
            "node",
            "-e",
            "require('node:http').createServer((q, s) => { s.statusCode = 503; s.end(); }).listen(Number(process.env.JOBAPI_PORT), process.env.JOBAPI_HOST)",
          ],
        },
        {
          pattern: new RegExp(`@${ECHO}$`),
          workingDir: tmpdir(),
          cmd: [
            "node",
            "-e",
            "console.log('env ' + JSON.stringify(process.env)); require('node:http').createServer((q, s) => s.end(q.url === '/headers' ? JSON.stringify(q.headers) : q.url)).listen(Number(process.env.APP_PORT), process.env.APP_HOST)",
          ],
        },
        {
          pattern: new RegExp(`@${CRASHES}$`),
          workingDir: tmpdir(),
          cmd: ["node", "-e", "console.error('no storage'); process.exit(3)"],
        },
      ],
      restartBackoffMs: 100,
      // The local stack's stand-ins for what AKS gives a pod rendered for Azure.
      supplement: (input) => {
        // A supplement that fails (as a chown refused to a non-root kubelet would).
        if (input.pod.metadata.labels?.["test/supplement"] === "fails")
          throw new Error("EPERM: operation not permitted, chown '/kubelet/pods/x/node/kubeconfig'");
        return standIns(input);
      },
    });
    kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
  });

  afterAll(async () => {
    await cluster?.stop();
    rmSync(dataDir, { recursive: true, force: true });
    if (imageDir) rmSync(imageDir, { recursive: true, force: true });
  });

  it("B-027 applies the rendered manifests as field manager blastplane and the rollout completes; a second apply changes nothing", async () => {
    const objects = renderJobApiManifests(values("bp-one", RUNS));
    const applied = await applyManifests(kc, objects, { force: false });
    expect(applied.map((a) => a.kind)).toEqual([
      "Namespace",
      "ServiceAccount",
      "ServiceAccount",
      "Role",
      "RoleBinding",
      "ClusterRole",
      "ClusterRoleBinding",
      "Deployment",
      "DaemonSet",
      "ValidatingAdmissionPolicy",
      "ValidatingAdmissionPolicyBinding",
      "Service",
      "PodDisruptionBudget",
      "NetworkPolicy",
    ]);
    const deployment = cluster.store.get("deployments", "bp-one", "blastplane-jobapi");
    expect(deployment?.metadata.managedFields).toEqual([
      expect.objectContaining({ manager: "blastplane", operation: "Apply", apiVersion: "apps/v1" }),
    ]);
    expect(JSON.stringify(deployment?.spec)).toContain(`blastplanelocal.azurecr.io/blastplane-jobapi@${RUNS}`);
    const view = await eventually(async () => {
      const v = await readRollout(kc, "bp-one", "blastplane-jobapi");
      return v.state === "complete" ? v : undefined;
    }, SETTLE_MS);
    expect(view).toMatchObject({ replicas: 1, updated_replicas: 1, available_replicas: 1 });
    expect(view.pods).toEqual([expect.objectContaining({ phase: "Running", ready: true })]);
    // kubectl, the independent client, sees the same rollout.
    expect(await kubectl("bp-one", "rollout", "status", "deploy/blastplane-jobapi", "--timeout=20s")).toContain(
      "successfully rolled out",
    );
    const rv = cluster.store.get("deployments", "bp-one", "blastplane-jobapi")?.metadata.resourceVersion;
    await applyManifests(kc, objects, { force: false });
    expect(cluster.store.get("deployments", "bp-one", "blastplane-jobapi")?.metadata.resourceVersion).toBe(rv);
  });

  it("B-027 a job API rendered for Azure runs on the local cluster with the stack's stand-ins in place of Azure's, on a port of its own, ready once its probe passes", async () => {
    // bp-one's pod, from the test above: the manifests exactly as rendered for AKS.
    const core = kc.makeApiClient(CoreV1Api);
    const [pod] = (await core.listNamespacedPod({ namespace: "bp-one" })).items;
    const name = pod?.metadata?.name ?? "";
    const log = () => core.readNamespacedPodLog({ name, namespace: "bp-one" });
    const given = JSON.parse(
      /^given (.*)$/m.exec(
        await eventually(async () => ((await log()).includes("given") ? log() : undefined), SETTLE_MS),
      )?.[1] ?? "{}",
    );
    expect(given).toEqual({
      // Azure's workload identity, Key Vault and Entra, as the local stack has them.
      storage: AZURITE,
      account: null,
      vault: null,
      discovery: "http://127.0.0.1:1/tenant/v2.0/.well-known/openid-configuration",
      kubeconfig: true,
      secrets: [API_TOKEN_SECRET],
      // No network namespace: container port 8080 is a free port of this machine, on its loopback.
      port: expect.not.stringMatching(/^8080$/),
      host: "127.0.0.1",
      // Root's kubelet runs the pod as the image's user, who reads the copies it was given.
      uid: process.getuid?.() === 0 ? 1000 : process.getuid?.(),
    });
    expect(pod?.status?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    // The dashboard rotates the token: the pod's copy follows.
    writeFileSync(path.join(tokenStoreDir, API_TOKEN_SECRET), '{"current":{"value":"second"}}', { mode: 0o600 });
    await eventually(
      async () => ((await log()).includes('token {"current":{"value":"second"}}') ? true : undefined),
      SETTLE_MS,
    );
  });

  it("B-027 a job API pod whose readiness probe fails runs but is not available, and the rollout never completes", async () => {
    await applyManifests(kc, renderJobApiManifests(values("bp-unready", NEVER_READY)), { force: false });
    const core = kc.makeApiClient(CoreV1Api);
    // The kubelet's event for the failed probe (what `kubectl describe pod` shows).
    const event = await eventually(async () => {
      const events = await core.listNamespacedEvent({ namespace: "bp-unready" });
      return events.items.find((e) => e.reason === "Unhealthy" && e.message?.includes("statuscode"));
    }, SETTLE_MS);
    expect(event.message).toBe("Readiness probe failed: HTTP probe failed with statuscode: 503");
    const view = await readRollout(kc, "bp-unready", "blastplane-jobapi");
    expect(view).toMatchObject({ state: "progressing", available_replicas: 0 });
    expect(view.pods).toEqual([expect.objectContaining({ phase: "Running", ready: false })]);
  });

  it("B-027 the dashboard reaches a deployed job API through the API server's Service proxy: its Ready pod answers; with none Ready, 503 no endpoints", async () => {
    // bp-one's job API (ready) and bp-unready's (its probe fails), from the tests above.
    const through = (namespace: string) =>
      kubeFetch(kc)(`${serviceProxyUrl(cluster.url, namespace)}/v1/ready`, { headers: { "X-SVC-API-Token": "t" } });
    expect((await through("bp-one")).status).toBe(200);
    // kubectl, the independent client, takes the same path.
    await kubectl("bp-one", "get", "--raw", "/api/v1/namespaces/bp-one/services/blastplane-jobapi:http/proxy/v1/ready");
    const none = await through("bp-unready");
    expect(none.status).toBe(503);
    expect(await none.json()).toMatchObject({
      kind: "Status",
      reason: "ServiceUnavailable",
      message: 'no endpoints available for service "blastplane-jobapi"',
    });
    expect((await through("no-such-namespace")).status).toBe(404);
    // A malformed escape in the service's name is refused as the caller's mistake, not a 500.
    const malformed = await kubeFetch(kc)(`${cluster.url}/api/v1/namespaces/bp-one/services/%ZZ/proxy/v1/ready`, {});
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ kind: "Status", reason: "BadRequest" });
  });

  it("B-027 the job API's pod with the terminal's container runs both, each its own process: the deploy applies the terminal's account, token Secret and admission policy (without them the terminal waits), the terminal restarts on its own, gets no Azure stand-ins and a port of its own; the pod is Ready 2/2 once both are", async () => {
    const ns = "bp-term";
    const core = kc.makeApiClient(CoreV1Api);
    // A web app origin: the terminal's container is deployed with the job API's (infra/k8s/jobapi.yaml).
    const objects = renderJobApiManifests({ ...values(ns, WITH_TERMINAL), web_app_origin: "https://console.example" });
    const podSpec = (deploymentOf(objects).spec as { template: { spec: { containers: { name: string }[] } } }).template
      .spec;
    expect(podSpec.containers.map((c) => c.name)).toEqual(["jobapi", "terminal"]);
    // For the stand-ins (TERMINAL_STAND_IN, STAND_IN): where the terminal's token is mounted, and a
    // host file and folder of root's they must not reach.
    const victim = path.join(dataDir, "victim");
    writeFileSync(victim, "host file", { mode: 0o600 });
    const victimDir = path.join(dataDir, "victim-dir");
    mkdirSync(victimDir, { mode: 0o700 });
    const [jobApiEnv, terminalEnv] = podSpec.containers.map(
      (c) => (c as unknown as { env: { name: string; value: string }[] }).env,
    );
    terminalEnv?.push(
      { name: "TOKEN_DIR", value: "/var/run/secrets/kubernetes.io/serviceaccount" },
      { name: "VICTIM", value: victim },
    );
    jobApiEnv?.push({ name: "VICTIM", value: victim }, { name: "VICTIM_DIR", value: victimDir });
    // B-027 the deploy renders the terminal's objects (infra/k8s/terminal.yaml) with the container,
    // in the workspace's namespace, before the Deployment: its account, that account's token Secret,
    // Role, RoleBinding, and the admission policy (with its binding) keeping its exec to shard pods.
    const deploymentAt = objects.findIndex((o) => o.kind === "Deployment");
    expect(objects.map((o) => `${o.kind}/${o.metadata.name}`).slice(deploymentAt - 6, deploymentAt + 1)).toEqual([
      "ServiceAccount/blastplane-terminal",
      "Secret/blastplane-terminal-token",
      "Role/blastplane-terminal",
      "RoleBinding/blastplane-terminal",
      "ValidatingAdmissionPolicy/blastplane-terminal-exec",
      "ValidatingAdmissionPolicyBinding/blastplane-terminal-exec",
      "Deployment/blastplane-jobapi",
    ]);
    // First as the deploy applied them before it applied the terminal's objects: the pod's container
    // waits for a Secret nobody made (on AKS too: ContainerCreating until the rollout timed out).
    const terminalObject = (o: (typeof objects)[number]) => o.metadata.name.startsWith("blastplane-terminal");
    await applyManifests(
      kc,
      objects.filter((o) => !terminalObject(o)),
      { force: false },
    );
    const podName = async () => (await core.listNamespacedPod({ namespace: ns })).items[0]?.metadata?.name;
    const statusOf = async (container: string) => {
      const name = await podName();
      if (!name) return undefined;
      const pod = await core.readNamespacedPod({ name, namespace: ns });
      return { pod, status: pod.status?.containerStatuses?.find((c) => c.name === container) };
    };
    // Its token Secret (infra/k8s/terminal.yaml) is not there yet: the terminal waits, the job API runs, the pod is not Ready.
    const waiting = await eventually(async () => {
      const [jobapi, terminal] = [await statusOf("jobapi"), await statusOf("terminal")];
      return jobapi?.status?.ready && terminal?.status?.state?.waiting?.reason === "CreateContainerConfigError"
        ? terminal
        : undefined;
    }, SETTLE_MS);
    expect(waiting.status?.state?.waiting?.message).toContain('secret "blastplane-terminal-token" not found');
    expect(waiting.pod.status?.conditions?.find((c) => c.type === "Ready")).toMatchObject({ status: "False" });
    expect((await readRollout(kc, ns, "blastplane-jobapi")).state).toBe("progressing");
    // The deploy as it is: everything rendered, server-side applied as blastplane. The token
    // controller fills the account's token into the Secret; the terminal starts, fails once,
    // restarts by itself.
    await applyManifests(kc, objects, { force: false });
    expect(
      (await kubectl(ns, "get", "serviceaccount,secret,role,rolebinding", "-o", "name")).split("\n").filter(Boolean),
    ).toEqual(
      expect.arrayContaining([
        "serviceaccount/blastplane-terminal",
        "secret/blastplane-terminal-token",
        "role.rbac.authorization.k8s.io/blastplane-terminal",
        "rolebinding.rbac.authorization.k8s.io/blastplane-terminal",
      ]),
    );
    const policy = JSON.parse(
      await kubectl(ns, "get", "validatingadmissionpolicy", "blastplane-terminal-exec", "-o", "json"),
    ) as { spec: { matchConditions: { expression: string }[]; validations: { expression: string }[] } };
    // The policy names the workspace's namespace, in its match and in its rule.
    expect(policy.spec.matchConditions[0]?.expression).toContain(`system:serviceaccount:${ns}:blastplane-terminal`);
    expect(policy.spec.validations[0]?.expression).toContain(`request.namespace == "${ns}"`);
    expect(
      await kubectl(ns, "get", "validatingadmissionpolicybinding", "blastplane-terminal-exec", "-o", "name"),
    ).toContain("blastplane-terminal-exec");
    const tokenSecret = await eventually(async () => {
      const secret = await core.readNamespacedSecret({ name: "blastplane-terminal-token", namespace: ns });
      return secret.data?.token ? secret : undefined;
    }, SETTLE_MS);
    expect(tokenSecret.type).toBe("kubernetes.io/service-account-token");
    expect(tokenSecret.metadata?.managedFields?.find((m) => m.operation === "Apply")?.manager).toBe("blastplane");
    expect(Buffer.from(tokenSecret.data?.namespace ?? "", "base64").toString()).toBe(ns);
    const terminalToken = Buffer.from(tokenSecret.data?.token ?? "", "base64").toString();
    // Without a readiness probe the terminal counts as ready while its first start runs, so the pod
    // can be Ready for a moment before that start fails: wait for the restart, then for the rollout.
    const terminal = await eventually(async () => {
      const status = (await statusOf("terminal"))?.status;
      return status?.ready && (status.restartCount ?? 0) >= 1 ? status : undefined;
    }, SETTLE_MS);
    // The job API's container restarted too (its first start failed after its plants).
    const jobApi = await eventually(async () => {
      const status = (await statusOf("jobapi"))?.status;
      return status?.ready && (status.restartCount ?? 0) >= 1 ? status : undefined;
    }, SETTLE_MS);
    const view = await eventually(async () => {
      const v = await readRollout(kc, ns, "blastplane-jobapi");
      return v.state === "complete" ? v : undefined;
    }, SETTLE_MS);
    expect(view.pods).toEqual([expect.objectContaining({ phase: "Running", ready: true })]);
    expect(terminal).toMatchObject({ ready: true, restartCount: 1, state: { running: expect.anything() } });
    expect(terminal?.lastState?.terminated).toMatchObject({ exitCode: 2, reason: "Error" });
    expect(jobApi).toMatchObject({ ready: true, restartCount: 1 });
    expect(jobApi?.lastState?.terminated).toMatchObject({ exitCode: 2, reason: "Error" });
    // kubectl, the independent client: READY 2/2 (RESTARTS: both containers'), and each container's log on its own.
    expect(await kubectl(ns, "get", "pods")).toMatch(/blastplane-jobapi-\S+\s+2\/2\s+Running\s+2\b/);
    const name = (await podName()) ?? "";
    const terminalLog = await kubectl(ns, "logs", name, "-c", "terminal");
    expect(terminalLog).toContain("first start fails");
    const given = JSON.parse(/^terminal (.*)$/m.exec(terminalLog)?.[1] ?? "{}");
    // Its secret volume: the Secret's key, readable by the container, in a folder it cannot change,
    // made anew by the kubelet at each start (the previous one removed), below folders it cannot
    // change either; the symlinks it tried to plant were refused, and the host file is untouched.
    expect(given.token).toBe(terminalToken);
    const firstTokenDir = /^first start fails (.*)$/m.exec(terminalLog)?.[1];
    expect(firstTokenDir).toBeTruthy();
    expect(given.tokenDir).not.toBe(firstTokenDir);
    expect(existsSync(firstTokenDir as string)).toBe(false);
    expect(terminalLog).toMatch(/^plant mounted E[A-Z]+$/m);
    expect(terminalLog).toMatch(/^plant old E[A-Z]+$/m);
    expect(readFileSync(victim, "utf8")).toBe("host file");
    expect(statSync(victim)).toMatchObject({ uid: process.getuid?.(), mode: 0o100600 });
    const tokenDir = statSync(given.tokenDir);
    // Owned by the kubelet's user, group the pod's fsGroup (1000), 0750.
    expect({ uid: tokenDir.uid, gid: tokenDir.gid, mode: tokenDir.mode & 0o7777 }).toEqual({
      uid: process.getuid?.(),
      gid: 1000,
      mode: 0o750,
    });
    for (
      let dir = path.dirname(given.tokenDir);
      dir !== tmpdir() && dir !== path.dirname(dir);
      dir = path.dirname(dir)
    ) {
      const st = statSync(dir);
      expect({ dir, uid: st.uid, writableByOthers: (st.mode & 0o022) !== 0 }).toEqual({
        dir,
        uid: process.getuid?.(),
        writableByOthers: false,
      });
    }
    // The webhook skips the terminal (azure.workload.identity/skip-containers): no stand-ins for it.
    expect(given).toMatchObject({ kubeconfig: null, storage: null, port: expect.not.stringMatching(/^7681$/) });
    const jobApiLog = await kubectl(ns, "logs", name, "-c", "jobapi");
    const jobApiGiven = JSON.parse(/^given (.*)$/m.exec(jobApiLog)?.[1] ?? "{}");
    expect(jobApiGiven).toMatchObject({ storage: AZURITE, kubeconfig: true, secrets: [API_TOKEN_SECRET] });
    // B-027 what the node supplied the job API (its kubeconfig, its copy of the token store) is in a
    // folder of the kubelet's made anew at each start: the symlinks it tried to plant there, on
    // either start, were refused; the host file and folder are as they were (owner, mode, content).
    expect(jobApiLog).toMatch(/^plant kubeconfig 1 E[A-Z]+$/m);
    expect(jobApiLog).toMatch(/^plant secrets 1 E[A-Z]+$/m);
    expect(jobApiLog).toMatch(/^plant kubeconfig 2 E[A-Z]+$/m);
    expect(jobApiLog).toMatch(/^plant secrets 2 E[A-Z]+$/m);
    const firstNodeDir = /^first start fails (.*)$/m.exec(jobApiLog)?.[1];
    expect(firstNodeDir).toBeTruthy();
    expect(existsSync(firstNodeDir as string)).toBe(false);
    const nodeDir = /^node 2 (.*)$/m.exec(jobApiLog)?.[1] as string;
    expect(nodeDir).not.toBe(firstNodeDir);
    const owned = (file: string) => {
      const st = statSync(file);
      return { uid: st.uid, gid: st.gid, mode: st.mode & 0o7777 };
    };
    // The kubelet's folder (group the pod's fsGroup 1000, 0750), the job API's files in it (uid 1000, 0600).
    const kubelet = process.getuid?.() ?? 0;
    expect(owned(nodeDir)).toEqual({ uid: kubelet, gid: 1000, mode: 0o750 });
    expect(owned(path.join(nodeDir, "secrets"))).toEqual({ uid: kubelet, gid: 1000, mode: 0o750 });
    expect(owned(path.join(nodeDir, "kubeconfig"))).toEqual({ uid: 1000, gid: 1000, mode: 0o600 });
    expect(owned(path.join(nodeDir, "secrets", API_TOKEN_SECRET))).toEqual({ uid: 1000, gid: 1000, mode: 0o600 });
    // The dashboard rotates the token while the job API runs: its copy follows, through no symlink.
    writeFileSync(path.join(tokenStoreDir, API_TOKEN_SECRET), '{"current":{"value":"third"}}', { mode: 0o600 });
    await eventually(
      async () =>
        (await kubectl(ns, "logs", name, "-c", "jobapi")).includes('token {"current":{"value":"third"}}')
          ? true
          : undefined,
      SETTLE_MS,
    );
    expect(readFileSync(victim, "utf8")).toBe("host file");
    expect(statSync(victim)).toMatchObject({ uid: process.getuid?.(), mode: 0o100600 });
    expect(readdirSync(victimDir)).toEqual([]);
    expect(statSync(victimDir)).toMatchObject({ uid: process.getuid?.(), mode: 0o40700 });
    // The pod's two listen ports are two ports of this machine.
    expect(given.port).not.toBe(jobApiGiven.port);
    await expect(kubectl(ns, "logs", name, "-c", "nosuch")).rejects.toThrow(/container nosuch is not valid/);
    // A deploy again (the same values) leaves the token the controller filled in place.
    await applyManifests(kc, objects, { force: false });
    expect((await core.readNamespacedSecret({ name: "blastplane-terminal-token", namespace: ns })).data?.token).toBe(
      tokenSecret.data?.token,
    );
  });

  it("an apply that would change a field another manager set is a 409 naming the manager and the field, unless forced", async () => {
    const objects = renderJobApiManifests(values("bp-two", RUNS));
    await applyManifests(kc, objects, { force: false });
    // A person scales the Deployment by hand (kubectl's own field manager).
    await kubectl("bp-two", "patch", "deploy/blastplane-jobapi", "--type=merge", "-p", '{"spec":{"replicas":2}}');
    const error = await applyManifests(kc, objects, { force: false }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApplyConflictError);
    expect((error as ApplyConflictError).conflicts).toEqual([
      { object: "Deployment/blastplane-jobapi", manager: expect.stringMatching(/^kubectl/), field: ".spec.replicas" },
    ]);
    expect((error as Error).message).toMatch(/\.spec\.replicas \(owned by "kubectl[^"]*"\).*force/);
    // The dry run reports the same conflict and stores nothing.
    await expect(applyManifests(kc, objects, { force: false, dryRun: true })).rejects.toBeInstanceOf(
      ApplyConflictError,
    );
    expect(replicasOf("bp-two")).toBe(2);
    await applyManifests(kc, objects, { force: true });
    const after = cluster.store.get("deployments", "bp-two", "blastplane-jobapi");
    expect(replicasOf("bp-two")).toBe(1);
    const replicasOwners = ((after?.metadata.managedFields ?? []) as { manager: string; fieldsV1: unknown }[])
      .filter((m) => JSON.stringify(m.fieldsV1).includes('"f:replicas"'))
      .map((m) => m.manager);
    expect(replicasOwners).toEqual(["blastplane"]);
  });

  it("kubectl apply --server-side works against the local API, and a field left out of a later apply is removed", async () => {
    const ns = "bp-kubectl";
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
    const sa = (labels: Record<string, string>) =>
      JSON.stringify({
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "probe", namespace: ns, labels },
      });
    const apply = async (text: string, manager = "tester") => {
      const file = path.join(dataDir, `sa-${manager}-${cluster.store.resourceVersion}.json`);
      writeFileSync(file, text);
      return kubectl(ns, "apply", "--server-side", `--field-manager=${manager}`, "--validate=false", "-f", file);
    };
    expect(await apply(sa({ a: "1", b: "2" }))).toContain("serviceaccount/probe serverside-applied");
    await apply(sa({ a: "1" }));
    expect(cluster.store.get("serviceaccounts", ns, "probe")?.metadata.labels).toEqual({ a: "1" });
    // Another manager's conflicting value: kubectl reports the conflict as the API server words it.
    const refused = await apply(sa({ a: "2" }), "other").then(
      () => "",
      (e: { stderr?: string }) => e.stderr ?? "",
    );
    expect(refused).toContain('conflict with "tester"');
    expect(refused).toContain(".metadata.labels.a");
    expect(cluster.store.get("serviceaccounts", ns, "probe")?.metadata.labels).toEqual({ a: "1" });
  });

  it("a rollout that never becomes ready names each pod's reason: ImagePullBackOff, CrashLoopBackOff, Unschedulable", async () => {
    // An image the registry never built: the kubelet cannot pull it.
    await applyManifests(kc, renderJobApiManifests(values("bp-pull", digest("c"))), { force: false });
    // An image whose process exits at once.
    await applyManifests(kc, renderJobApiManifests(values("bp-crash", CRASHES)), { force: false });
    // A pool that does not exist: nothing can schedule the pod.
    const unschedulable = renderJobApiManifests(values("bp-nowhere", RUNS));
    const template = (
      deploymentOf(unschedulable).spec as { template: { spec: { nodeSelector: Record<string, string> } } }
    ).template.spec;
    template.nodeSelector = { [BLAST_POOL.label]: "gpu" };
    await applyManifests(kc, unschedulable, { force: false });
    const reasonOf = async (ns: string, reason: RegExp) =>
      eventually(async () => {
        const v = await readRollout(kc, ns, "blastplane-jobapi");
        return v.state === "progressing" && v.pods.some((p) => reason.test(p.reason ?? "")) ? v : undefined;
      }, SETTLE_MS);
    expect(rolloutFailure(await reasonOf("bp-pull", /ImagePullBackOff|ErrImagePull/), 300)).toMatch(
      /^the job API did not become ready within 300 s: blastplane-jobapi-\w+-\w+: (ImagePullBackOff|ErrImagePull) \(.*blastplane-jobapi@sha256:c+/,
    );
    expect(rolloutFailure(await reasonOf("bp-crash", /CrashLoopBackOff/), 300)).toMatch(
      /CrashLoopBackOff \(last exit code 3/,
    );
    expect(rolloutFailure(await reasonOf("bp-nowhere", /Unschedulable/), 300)).toMatch(
      /Unschedulable \(0\/1 nodes are available/,
    );
  });

  it("a Deployment's template change rolls its pods (Recreate: the old pod goes before the new one starts)", async () => {
    const apps = kc.makeApiClient(AppsV1Api);
    const objects = renderJobApiManifests(values("bp-roll", RUNS));
    await applyManifests(kc, objects, { force: false });
    const first = await eventually(async () => {
      const v = await readRollout(kc, "bp-roll", "blastplane-jobapi");
      return v.state === "complete" ? v : undefined;
    }, SETTLE_MS);
    const changed = structuredClone(objects);
    const container = (deploymentOf(changed).spec as { template: { spec: { containers: { env: unknown[] }[] } } })
      .template.spec.containers[0];
    container?.env.push({ name: "EXTRA", value: "1" });
    const applied = await applyManifests(kc, changed, { force: false });
    expect(applied.find((a) => a.kind === "Deployment")?.generation).toBe(2);
    const second = await eventually(async () => {
      const v = await readRollout(kc, "bp-roll", "blastplane-jobapi");
      return v.state === "complete" && v.observed_generation === 2 && v.pods[0]?.name !== first.pods[0]?.name
        ? v
        : undefined;
    }, SETTLE_MS);
    expect(second.pods).toHaveLength(1);
    const read = await apps.readNamespacedDeployment({ name: "blastplane-jobapi", namespace: "bp-roll" });
    expect(read.status?.conditions?.find((c) => c.type === "Progressing")?.reason).toBe("NewReplicaSetAvailable");
  });

  /** A bare pod on the BLAST pool running `image`, with container port 8080. */
  const barePod = (name: string, image: string, extra: { labels?: Record<string, string>; container?: object }) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: extra.labels },
    spec: {
      restartPolicy: "Always",
      tolerations: [{ key: "blastplane.io/pool", operator: "Equal", value: "blast", effect: "NoSchedule" }],
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: "main",
          image: `blastplanelocal.azurecr.io/other@${image}`,
          ports: [{ name: "http", containerPort: 8080 }],
          resources: { requests: { memory: "64Mi", cpu: "100m" } },
          ...extra.container,
        },
      ],
    },
  });

  it("a readiness path without its leading / is probed as Kubernetes does (no crash); only the listen port and host variables are rewritten; a workload-identity pod outside the job API gets no stand-ins", async () => {
    const ns = "bp-pods";
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await core.createNamespacedPod({
      namespace: ns,
      body: barePod("echo", ECHO, {
        // Labelled for the workload identity, but not the job API's namespace or service account.
        labels: { "azure.workload.identity/use": "true" },
        container: {
          env: [
            { name: "APP_PORT", value: "8080" },
            { name: "APP_HOST", value: "0.0.0.0" },
            // Values that merely equal the port or the any-address are left as they are.
            { name: "APP_TIMEOUT_MS", value: "8080" },
            { name: "APP_PEERS", value: "0.0.0.0" },
            { name: "JOBAPI_STORAGE_ACCOUNT_NAME", value: "blastplanedata" },
          ],
          readinessProbe: { httpGet: { path: "v1/ready", port: "http" }, periodSeconds: 1 },
        },
      }),
    });
    const ready = await eventually(async () => {
      const pod = await core.readNamespacedPod({ name: "echo", namespace: ns });
      return pod.status?.conditions?.find((c) => c.type === "Ready")?.status === "True" ? pod : undefined;
    }, SETTLE_MS);
    expect(ready.status?.containerStatuses?.[0]?.ready).toBe(true);
    const log = await core.readNamespacedPodLog({ name: "echo", namespace: ns });
    const env = JSON.parse(/^env (.*)$/m.exec(log)?.[1] ?? "{}") as Record<string, string>;
    expect(env).toMatchObject({
      APP_PORT: expect.not.stringMatching(/^8080$/),
      APP_HOST: "127.0.0.1",
      APP_TIMEOUT_MS: "8080",
      APP_PEERS: "0.0.0.0",
      JOBAPI_STORAGE_ACCOUNT_NAME: "blastplanedata",
    });
    expect(env.JOBAPI_STORAGE_CONNECTION_STRING).toBeUndefined();
    expect(env.KUBECONFIG).toBeUndefined();
    // Any failed probe (before the process listened) asked for the path with its `/`.
    const events = await core.listNamespacedEvent({ namespace: ns });
    for (const e of events.items.filter((e) => e.reason === "Unhealthy"))
      expect(e.message).toMatch(/127\.0\.0\.1:\d+\/v1\/ready"/);
  });

  it("B-027 the Service proxy does not pass the caller's Authorization on to the pod (it authenticated the caller to the API server); other headers and the path go through", async () => {
    const ns = "bp-pods";
    const core = kc.makeApiClient(CoreV1Api);
    // The echo pod of the test above (Ready), behind a Service that selects it by its one label.
    await core.createNamespacedService({
      namespace: ns,
      body: {
        metadata: { name: "echo" },
        spec: {
          selector: { "azure.workload.identity/use": "true" },
          ports: [{ name: "http", port: 80, targetPort: "http" }],
        },
      },
    });
    const res = await kubeFetch(kc)(`${cluster.url}/api/v1/namespaces/${ns}/services/echo:http/proxy/headers`, {
      headers: { "X-SVC-API-Token": "t" },
    });
    expect(res.status).toBe(200);
    const seen = (await res.json()) as Record<string, string>;
    expect(seen["x-svc-api-token"]).toBe("t");
    expect(seen.authorization).toBeUndefined();
    // The caller did authenticate with a bearer credential: without it the API server refuses.
    const options: { headers?: Record<string, unknown> } = {};
    await kc.applyToHTTPSOptions(options as never);
    expect(String(options.headers?.Authorization ?? options.headers?.authorization ?? "")).toMatch(/^Bearer \S+/);
  });

  it("a supplement that fails leaves the container waiting with CreateContainerConfigError and its message (the stack's process goes on)", async () => {
    const ns = "bp-pods";
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespacedPod({
      namespace: ns,
      body: barePod("refused", ECHO, { labels: { "test/supplement": "fails" } }),
    });
    const waiting = await eventually(async () => {
      const pod = await core.readNamespacedPod({ name: "refused", namespace: ns });
      const state = pod.status?.containerStatuses?.[0]?.state?.waiting;
      return state?.reason === "CreateContainerConfigError" ? state : undefined;
    }, SETTLE_MS);
    expect(waiting.message).toBe("EPERM: operation not permitted, chown '/kubelet/pods/x/node/kubeconfig'");
  });
});
