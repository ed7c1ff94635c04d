import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { ApiException, BatchV1Api, CoreV1Api, KubeConfig, type V1Job, Watch } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blastPoolNodes, type LocalCluster, startLocalCluster } from "../../local/kube/cluster.js";
import type { KubeObject } from "../../local/kube/selectors.js";
import { createLogger } from "../../shared/logging/logger.js";
import { eventually } from "../support/local-stack.js";

const run = promisify(execFile);
const NS = "blastplane";
const MiB = 1024 ** 2;

/** A Job whose pod runs `script` with this machine's Node (image `node:22`), on the BLAST pool. */
function nodeJob(
  name: string,
  script: string,
  extra: {
    memoryLimit?: string;
    memoryRequest?: string;
    spec?: Record<string, unknown>;
    image?: string;
    nodeSelector?: Record<string, string>;
  } = {},
): V1Job {
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: { name, labels: { app: "kube-api-test" } },
    spec: {
      backoffLimit: 0,
      ...(extra.spec ?? {}),
      template: {
        metadata: { labels: { app: "kube-api-test" } },
        spec: {
          restartPolicy: "Never",
          nodeSelector: extra.nodeSelector,
          tolerations: [{ key: "blastplane.io/pool", operator: "Equal", value: "blast", effect: "NoSchedule" }],
          terminationGracePeriodSeconds: 2,
          containers: [
            {
              name: "main",
              image: extra.image ?? "node:22",
              command: ["node", "-e", script],
              env: [
                { name: "GREETING", value: "hello" },
                { name: "MY_NODE", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
              ],
              resources: {
                requests: { memory: extra.memoryRequest ?? "64Mi", cpu: "100m" },
                limits: extra.memoryLimit ? { memory: extra.memoryLimit } : undefined,
              },
            },
          ],
        },
      },
    },
  };
}

describe("local Kubernetes API", () => {
  let cluster: LocalCluster;
  let dataDir: string;
  let batch: BatchV1Api;
  let core: CoreV1Api;
  let kc: KubeConfig;
  const kubectl = async (...args: string[]) =>
    (await run("kubectl", ["--kubeconfig", cluster.kubeconfigPath, "-n", NS, ...args])).stdout;
  const job = (name: string) => cluster.store.get("jobs", NS, name);
  const podsOf = (name: string) => cluster.store.list("pods", NS, (p) => p.metadata.labels?.["job-name"] === name);
  const condition = (obj: KubeObject | undefined, type: string) =>
    (
      (
        obj?.status as
          | { conditions?: { type: string; status: string; reason?: string; message?: string }[] }
          | undefined
      )?.conditions ?? []
    ).find((c) => c.type === type && c.status === "True");
  const finished = (name: string, type: "Complete" | "Failed", timeoutMs = 20_000) =>
    eventually(async () => condition(job(name), type), timeoutMs, 50);

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), "bp-kube-"));
    cluster = await startLocalCluster({
      logger: createLogger({ level: "warn" }),
      dataDir,
      nodes: blastPoolNodes(2, 1024 * MiB, 2),
      namespaces: [NS],
      images: [{ pattern: /^node(:[\w.-]+)?$/, workingDir: dataDir, cmd: ["node"] }],
      bookmarkIntervalMs: 200,
      podBackoffMs: 100,
    });
    kc = new KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    batch = kc.makeApiClient(BatchV1Api);
    core = kc.makeApiClient(CoreV1Api);
  });

  afterAll(async () => {
    await cluster?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("serves kubectl: get nodes, get/describe jobs and pods, logs, delete (the independent client)", async () => {
    expect(await kubectl("get", "nodes")).toMatch(/local-blast-0\s+Ready/);
    await batch.createNamespacedJob({
      namespace: NS,
      body: nodeJob("hello", "console.log(process.env.GREETING, 'from', process.env.MY_NODE)"),
    });
    await finished("hello", "Complete");
    const listing = await kubectl("get", "jobs,pods");
    expect(listing).toMatch(/job\.batch\/hello\s+Complete\s+1\/1/);
    expect(listing).toMatch(/pod\/hello-\w{5}\s+0\/1\s+Completed\s+0/);
    expect(await kubectl("logs", "job/hello")).toMatch(/^hello from local-blast-[01]\n$/);
    const described = await kubectl("describe", "job", "hello");
    expect(described).toContain("Pods Statuses:    0 Active (0 Ready) / 1 Succeeded / 0 Failed");
    expect(described).toMatch(/SuccessfulCreate\s+\S+\s+job-controller\s+Created pod: hello-/);
    expect(await kubectl("describe", "pod", "-l", "job-name=hello")).toMatch(
      /Reason:\s+Completed[\s\S]*Exit Code:\s+0/,
    );
    // kubectl deletes in the background: the Job goes, then its pod.
    expect(await kubectl("delete", "job", "hello")).toContain('job.batch "hello" deleted');
    await eventually(async () => (job("hello") === undefined && podsOf("hello").length === 0 ? true : undefined));
    await expect(kubectl("get", "job", "hello")).rejects.toThrow(/NotFound|not found/);
  });

  it("answers the SDK's list, watch (bookmarks, selectors, 410 Gone for a compacted version) and delete", async () => {
    const list = await batch.listNamespacedJob({ namespace: NS, labelSelector: "app=kube-api-test" });
    const from = String(list.metadata?.resourceVersion);
    const events: string[] = [];
    let bookmarks = 0;
    const done = new Promise<unknown>((resolve) => {
      void new Watch(kc)
        .watch(
          `/apis/batch/v1/namespaces/${NS}/jobs`,
          { resourceVersion: from, allowWatchBookmarks: true, labelSelector: "app=kube-api-test" },
          (type: string, obj: V1Job) => {
            if (type === "BOOKMARK") bookmarks++;
            else events.push(`${type} ${obj.metadata?.name}`);
          },
          resolve,
        )
        .then((controller) => {
          watching = controller;
        });
    });
    let watching: AbortController | undefined;
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob("watched", "setTimeout(() => {}, 100)") });
    await finished("watched", "Complete");
    await batch.deleteNamespacedJob({ name: "watched", namespace: NS, propagationPolicy: "Background" });
    await eventually(async () => (events.includes("DELETED watched") && bookmarks > 0 ? true : undefined));
    expect(events[0]).toBe("ADDED watched");
    expect(events.filter((e) => e.startsWith("MODIFIED")).length).toBeGreaterThan(0);
    watching?.abort();
    await done;

    // After compaction the old version is gone: the watch answers ERROR 410 Expired.
    cluster.api.expireWatches();
    const errors: { code?: number; reason?: string }[] = [];
    await new Promise<unknown>((resolve) => {
      void new Watch(kc).watch(
        `/apis/batch/v1/namespaces/${NS}/jobs`,
        { resourceVersion: from },
        (type: string, obj: { code?: number; reason?: string }) => {
          if (type === "ERROR") errors.push(obj);
        },
        resolve,
      );
    });
    expect(errors).toEqual([expect.objectContaining({ code: 410, reason: "Expired" })]);
  });

  it("answers Kubernetes Status errors: 404 NotFound, 409 AlreadyExists, 422 Invalid with causes, 401 without the token", async () => {
    const statusOf = async (p: Promise<unknown>) => {
      try {
        await p;
      } catch (error) {
        expect(error).toBeInstanceOf(ApiException);
        const e = error as ApiException<string>;
        return { code: e.code, body: typeof e.body === "string" ? JSON.parse(e.body) : e.body };
      }
      throw new Error("expected a failure");
    };
    const missing = await statusOf(batch.readNamespacedJob({ name: "nope", namespace: NS }));
    expect(missing).toMatchObject({
      code: 404,
      body: { kind: "Status", status: "Failure", reason: "NotFound", code: 404 },
    });
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob("twice", "0") });
    expect(await statusOf(batch.createNamespacedJob({ namespace: NS, body: nodeJob("twice", "0") }))).toMatchObject({
      code: 409,
      body: { reason: "AlreadyExists" },
    });
    const always = nodeJob("always", "0");
    (always.spec?.template.spec as { restartPolicy: string }).restartPolicy = "Always";
    const invalid = await statusOf(batch.createNamespacedJob({ namespace: NS, body: always }));
    expect(invalid).toMatchObject({
      code: 422,
      body: {
        reason: "Invalid",
        details: { causes: [expect.objectContaining({ field: "spec.template.spec.restartPolicy" })] },
      },
    });
    const noToken = await run("kubectl", [
      "--kubeconfig",
      cluster.kubeconfigPath,
      "--token",
      "wrong",
      "get",
      "pods",
    ]).catch((e: { stderr: string }) => e.stderr);
    expect(String(noToken)).toMatch(/Unauthorized|provide credentials/);
  });

  it("kills a container over its memory limit: OOMKilled, exit code 137, the Job fails", async () => {
    const hog = "const a = []; setInterval(() => a.push(Buffer.alloc(16 * 1024 * 1024, 1)), 20)";
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob("hog", hog, { memoryLimit: "128Mi" }) });
    const failed = await finished("hog", "Failed");
    expect(failed.reason).toBe("BackoffLimitExceeded");
    const status = podsOf("hog")[0]?.status ?? {};
    expect((status as { phase: string }).phase).toBe("Failed");
    expect(
      (status as { containerStatuses: { state: { terminated: unknown } }[] }).containerStatuses[0]?.state.terminated,
    ).toMatchObject({ reason: "OOMKilled", exitCode: 137 });
    expect(await kubectl("get", "pods", "-l", "job-name=hog")).toMatch(/OOMKilled/);
  });

  it("retries a failing pod up to backoffLimit and reports the Job as Kubernetes does", async () => {
    await batch.createNamespacedJob({
      namespace: NS,
      body: nodeJob("flaky", "console.error('boom'); process.exit(3)", { spec: { backoffLimit: 1 } }),
    });
    await finished("flaky", "Failed");
    const status = job("flaky")?.status as { failed: number; active: number; conditions: { type: string }[] };
    expect(status.failed).toBe(2);
    expect(status.active).toBe(0);
    expect(status.conditions.map((c) => c.type)).toEqual(["FailureTarget", "Failed"]);
    const pods = podsOf("flaky");
    expect(pods).toHaveLength(2);
    for (const p of pods)
      expect(
        (p.status as { containerStatuses: { state: { terminated: { reason: string; exitCode: number } } }[] })
          .containerStatuses[0]?.state.terminated,
      ).toMatchObject({ reason: "Error", exitCode: 3 });
  });

  it("ends a Job past activeDeadlineSeconds (DeadlineExceeded, its pod stopped) and deletes finished Jobs after ttlSecondsAfterFinished", async () => {
    await batch.createNamespacedJob({
      namespace: NS,
      body: nodeJob("slow", "setTimeout(() => {}, 60000)", { spec: { activeDeadlineSeconds: 1 } }),
    });
    expect((await finished("slow", "Failed")).reason).toBe("DeadlineExceeded");
    expect(podsOf("slow")).toHaveLength(0);
    await batch.createNamespacedJob({
      namespace: NS,
      body: nodeJob("brief", "0", { spec: { ttlSecondsAfterFinished: 1 } }),
    });
    await finished("brief", "Complete");
    await eventually(
      async () => (job("brief") === undefined && podsOf("brief").length === 0 ? true : undefined),
      10_000,
    );
  });

  it("leaves a pod no node can take Pending with reason Unschedulable, and an unknown image in ImagePullBackOff", async () => {
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob("huge", "0", { memoryRequest: "64Gi" }) });
    const scheduled = await eventually(
      async () =>
        condition(podsOf("huge")[0], "PodScheduled") ??
        (
          (
            podsOf("huge")[0]?.status as {
              conditions?: { type: string; status: string; reason?: string; message?: string }[];
            }
          )?.conditions ?? []
        ).find((c) => c.type === "PodScheduled"),
    );
    expect(scheduled).toMatchObject({
      status: "False",
      reason: "Unschedulable",
      message: expect.stringMatching(/^0\/2 nodes are available: 2 Insufficient memory\./),
    });
    expect(await kubectl("describe", "pod", "-l", "job-name=huge")).toMatch(
      /FailedScheduling.*0\/2 nodes are available: 2 Insufficient memory/,
    );
    await batch.createNamespacedJob({
      namespace: NS,
      body: nodeJob("noimage", "0", { image: "registry.invalid/nothing:1" }),
    });
    await eventually(
      async () =>
        (await kubectl("get", "pods", "-l", "job-name=noimage")).includes("ImagePullBackOff") ? true : undefined,
      10_000,
    );
  });

  it("deletes with propagation: Orphan keeps the pod, Foreground holds the Job until its pod is gone, a lost node takes its pods and the Job replaces them", async () => {
    const sleeper = "setTimeout(() => {}, 60000)";
    await batch.createNamespacedJob({ namespace: NS, body: nodeJob("orphaned", sleeper) });
    const [pod] = await eventually(async () =>
      podsOf("orphaned").some((p) => (p.status as { phase: string }).phase === "Running")
        ? podsOf("orphaned")
        : undefined,
    );
    await batch.deleteNamespacedJob({ name: "orphaned", namespace: NS, propagationPolicy: "Orphan" });
    const kept = cluster.store.get("pods", NS, String(pod?.metadata.name));
    expect(kept?.metadata.ownerReferences).toBeUndefined();
    await core.deleteNamespacedPod({ name: String(pod?.metadata.name), namespace: NS, gracePeriodSeconds: 0 });

    await batch.createNamespacedJob({ namespace: NS, body: nodeJob("fg", sleeper) });
    await eventually(async () =>
      podsOf("fg").some((p) => (p.status as { phase: string }).phase === "Running") ? true : undefined,
    );
    await batch.deleteNamespacedJob({ name: "fg", namespace: NS, propagationPolicy: "Foreground" });
    expect(job("fg")?.metadata.finalizers).toContain("foregroundDeletion");
    await eventually(async () => (job("fg") === undefined ? true : undefined), 10_000);
    expect(podsOf("fg")).toHaveLength(0);

    // A node lost: its pods are deleted; the Job counts the failure and starts a replacement elsewhere.
    // The pod runs until the test has removed its node (a file the test writes after), so the node
    // is always lost mid-run; the replacement finds the file and ends at once.
    const nodeGone = path.join(dataDir, "survivor-node-gone");
    const untilNodeGone = `setInterval(() => require("node:fs").existsSync(${JSON.stringify(nodeGone)}) && process.exit(0), 50)`;
    await batch.createNamespacedJob({
      namespace: NS,
      body: nodeJob("survivor", untilNodeGone, { spec: { backoffLimit: 1 } }),
    });
    const first = await eventually(async () =>
      podsOf("survivor").find((p) => (p.status as { phase: string }).phase === "Running"),
    );
    const lost = String((first.spec as { nodeName: string }).nodeName);
    await core.deleteNode({ name: lost });
    expect(await kubectl("get", "nodes")).not.toContain(lost);
    writeFileSync(nodeGone, "");
    await finished("survivor", "Complete");
    const pods = podsOf("survivor");
    expect(pods.map((p) => (p.spec as { nodeName: string }).nodeName)).not.toContain(lost);
    expect((job("survivor")?.status as { failed?: number } | undefined)?.failed).toBe(1);
  });
});
