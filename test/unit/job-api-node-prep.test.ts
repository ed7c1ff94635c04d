/**
 * What the deployed job API's shard and warm-up pods need of an AKS node and of the cluster
 * (issue 28): a database cache folder the manifest names and the node-prep DaemonSet makes on every
 * BLAST node for the pods' user; a namespace whose admission lets that one hostPath through while
 * holding every pod to what Pod Security "restricted" asks; a NetworkPolicy that admits the API
 * server's Service proxy, through which the dashboard reaches the deployed job API.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { buildShardArgs } from "../../jobapi/executors/executor.js";
import { buildShardJob, POD_USER } from "../../jobapi/executors/kubernetes-manifests.js";
import {
  type KubeManifest,
  NODE_DB_CACHE_DIR,
  NODE_DB_CACHE_PARENT,
  renderJobApiManifests,
} from "../../shared/cluster/job-api-manifests.js";
import { sampleJobApiValues } from "../support/job-api-values.js";

// biome-ignore lint/suspicious/noExplicitAny: a rendered manifest's shape, read as the API server would
type Any = Record<string, any>;
const objects = renderJobApiManifests(sampleJobApiValues({ namespace: "team-a" }));
const find = (kind: string, name?: string) =>
  objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name)) as KubeManifest & Any;
const deployment = find("Deployment");
const jobapi = deployment.spec.template.spec.containers.find((c: Any) => c.name === "jobapi");
const env = Object.fromEntries((jobapi.env as { name: string; value: string }[]).map((e) => [e.name, e.value]));
const prep = find("DaemonSet", "blastplane-node-prep");
const work = mkdtempSync(path.join(tmpdir(), "node-prep-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the deployed job API's database cache on AKS nodes", () => {
  it("the manifest names the node's cache folder, and the job API's shard pods mount exactly that folder", () => {
    expect(env.JOBAPI_K8S_DB_CACHE_DIR).toBe(NODE_DB_CACHE_DIR);
    expect(NODE_DB_CACHE_DIR).toBe(`${NODE_DB_CACHE_PARENT}/databases`);
    // The job API's own configuration reads it (not its /data/databases default, which no AKS node has).
    const config = loadJobApiConfig({ ...env, JOBAPI_STORAGE_ACCOUNT_NAME: "data" }, "/");
    const settings = config.kubernetes as NonNullable<typeof config.kubernetes>;
    expect(settings.dbCacheDir).toBe(NODE_DB_CACHE_DIR);
  });

  it("the node-prep DaemonSet runs on every BLAST node the job API's pods may land on, its one root step with no capability but CHOWN", () => {
    const pod = prep.spec.template.spec;
    expect(pod.nodeSelector).toEqual(deployment.spec.template.spec.nodeSelector);
    expect(pod.tolerations).toEqual(deployment.spec.template.spec.tolerations);
    expect(pod.automountServiceAccountToken).toBe(false);
    const [init] = pod.initContainers;
    expect(pod.initContainers).toHaveLength(1);
    expect(init.securityContext).toEqual({
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"], add: ["CHOWN"] },
    });
    // The job API's own image, pinned by the same digest: no other image is pulled.
    for (const c of [init, ...pod.containers]) expect(c.image).toBe(jobapi.image);
    for (const c of pod.containers)
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: POD_USER.uid,
        allowPrivilegeEscalation: false,
      });
    expect(pod.volumes).toEqual([
      { name: "node-folder", hostPath: { path: NODE_DB_CACHE_PARENT, type: "DirectoryOrCreate" } },
    ]);
    expect(init.volumeMounts).toEqual([{ name: "node-folder", mountPath: "/host" }]);
  });

  it("the node-prep step makes the cache folder 0700 for the pods' user, and leaves one they already own as it is", () => {
    const [init] = prep.spec.template.spec.initContainers;
    const node = path.join(work, "node");
    execFileSync("mkdir", ["-p", node]);
    // Its mount path is the node's folder: run the step's own script against a folder standing in for it.
    const script = (init.command as string[]).at(-1)?.replaceAll('"/host/', `"${node}/`) as string;
    expect(init.command.slice(0, 2)).toEqual(["node", "-e"]);
    const isRoot = process.getuid?.() === 0;
    if (!isRoot) {
      // Without root the chown is refused: the folder is still made, closed to others.
      expect(() => execFileSync(process.execPath, ["-e", script], { stdio: "pipe" })).toThrow(/EPERM/);
      expect(statSync(path.join(node, "databases")).mode & 0o777).toBe(0o700);
      return;
    }
    execFileSync(process.execPath, ["-e", script]);
    const made = statSync(path.join(node, "databases"));
    expect({ uid: made.uid, gid: made.gid, mode: made.mode & 0o7777 }).toEqual({ ...POD_USER, mode: 0o700 });
    // Run again (a DaemonSet pod restarts): nothing changes, nothing fails.
    execFileSync(process.execPath, ["-e", script]);
    expect(statSync(path.join(node, "databases")).ino).toBe(made.ino);
    // The shard Job the deployed job API builds mounts that folder, and it must already exist (Directory).
    const volume = buildShardJob(
      {
        jobId: "j",
        shardId: "s",
        program: "blastn",
        args: buildShardArgs({ optionArgs: [], queryPath: "/q.fa", dbPath: "db", outputPath: "/o.xml", threads: 1 }),
        outputPath: "/o.xml",
        cwd: "/c",
        attempt: 1,
        batch: 0,
        queryPath: "/q.fa",
        database: { name: "db", version: "v" },
        memoryBytes: 1024 ** 3,
        threads: 1,
      } as never,
      {
        namespace: "team-a",
        image: env.JOBAPI_K8S_IMAGE as string,
        nodeSelector: {},
        tolerations: [],
        backoffLimit: 0,
        activeDeadlineSeconds: 60,
        ttlSecondsAfterFinished: 60,
        workingSetBytes: 0,
        dbCacheHostPath: env.JOBAPI_K8S_DB_CACHE_DIR as string,
      },
    ).spec?.template.spec?.volumes?.find((v) => v.hostPath);
    expect(volume?.hostPath).toEqual({ path: NODE_DB_CACHE_DIR, type: "Directory" });
  });
});

describe("the namespace's pod admission", () => {
  it("Pod Security cannot enforce restricted or baseline (both forbid every hostPath): it audits and warns against restricted, and the namespace's policy enforces the rest", () => {
    const labels = find("Namespace").metadata.labels as Record<string, string>;
    expect(labels["pod-security.kubernetes.io/enforce"]).toBe("privileged");
    expect(labels["pod-security.kubernetes.io/audit"]).toBe("restricted");
    expect(labels["pod-security.kubernetes.io/warn"]).toBe("restricted");
    const policy = find("ValidatingAdmissionPolicy", "blastplane-pods");
    expect(policy.spec.failurePolicy).toBe("Fail");
    expect(policy.spec.matchConstraints.resourceRules).toEqual([
      { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods"] },
    ]);
    // Scoped to the workspace's namespace, whatever it is called.
    expect(policy.spec.matchConditions).toEqual([
      { name: "the-blastplane-namespace", expression: 'request.namespace == "team-a"' },
    ]);
    const cel = (policy.spec.validations as { expression: string }[]).map((v) => v.expression).join("\n");
    // The cache folder is the only hostPath; its parent only for the DaemonSet controller's node-prep pods.
    expect(cel).toContain(`v.hostPath.path == "${NODE_DB_CACHE_DIR}"`);
    expect(cel).toContain(`(variables.nodePrep && v.hostPath.path == "${NODE_DB_CACHE_PARENT}")`);
    for (const rule of [
      "hostNetwork",
      "hostPID",
      "hostIPC",
      "allowPrivilegeEscalation",
      "privileged",
      "runAsNonRoot",
      "NET_BIND_SERVICE",
    ])
      expect(cel).toContain(rule);
    expect(find("ValidatingAdmissionPolicyBinding", "blastplane-pods").spec).toEqual({
      policyName: "blastplane-pods",
      validationActions: ["Deny"],
    });
  });
});

describe("the job API's NetworkPolicy", () => {
  it("admits the API server's Service proxy (the konnectivity agents), besides the Function App's subnet and the ingress controller, on the job API's port only", () => {
    const policy = find("NetworkPolicy", "blastplane-jobapi-ingress");
    expect(policy.spec.ingress).toEqual([
      {
        from: [
          { ipBlock: { cidr: "10.1.0.0/24" } },
          { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "app-routing-system" } } },
          {
            namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "kube-system" } },
            podSelector: { matchLabels: { app: "konnectivity-agent" } },
          },
        ],
        ports: [{ protocol: "TCP", port: 8080 }],
      },
    ]);
  });
});
