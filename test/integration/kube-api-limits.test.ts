/**
 * The local Kubernetes API's bounds and strictness (issue 21 item 8): the bearer scheme in any
 * case, command and args only as lists of strings, a watch that does not read is dropped instead of
 * growing this process, and the change history is bounded by bytes as well as by count.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { blastPoolNodes, type LocalCluster, startLocalCluster } from "../../local/kube/cluster.js";
import { createLogger } from "../../shared/logging/logger.js";
import { eventually } from "../support/local-stack.js";

const NS = "limits";
const MiB = 1024 ** 2;
let cluster: LocalCluster;
let dataDir: string;
/** An image whose project folder other users cannot enter (a checkout in a 0700 folder). */
let closedImageDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(path.join(tmpdir(), "bp-kube-limits-"));
  closedImageDir = mkdtempSync(path.join(tmpdir(), "bp-closed-image-"));
  mkdirSync(path.join(closedImageDir, "lib", "app"), { recursive: true });
  writeFileSync(
    path.join(closedImageDir, "lib", "app", "run.js"),
    "console.log(JSON.stringify({ uid: process.getuid(), cwd: process.cwd() }));\n",
  );
  cluster = await startLocalCluster({
    logger: createLogger({ level: "error" }),
    dataDir,
    nodes: blastPoolNodes(1, 1024 * MiB, 2),
    namespaces: [NS],
    images: [
      { pattern: /^node(:[\w.-]+)?$/, workingDir: dataDir, cmd: ["node"] },
      {
        pattern: /(^|\/)closed-app(:[\w.-]+)?$/,
        workingDir: closedImageDir,
        cmd: ["node", "lib/app/run.js"],
        files: ["lib/app"],
      },
    ],
    watchBufferLimitBytes: 1 * MiB,
    historyLimitBytes: 4 * MiB,
  });
});

afterAll(async () => {
  await cluster?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(closedImageDir, { recursive: true, force: true });
});

/** A request to the cluster's API with an Authorization header of the caller's choosing. */
function call(
  method: string,
  pathname: string,
  authorization: string | undefined,
  body?: unknown,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const url = new URL(pathname, cluster.url);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        rejectUnauthorized: false,
        headers: {
          ...(authorization === undefined ? {} : { authorization }),
          ...(body === undefined ? {} : { "content-type": "application/json" }),
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text || "{}") }));
      },
    );
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const secret = (name: string, bytes: number, fill = "a") => ({
  apiVersion: "v1",
  kind: "Secret",
  metadata: { name },
  data: { blob: Buffer.alloc(bytes, fill).toString("base64") },
});

describe("local Kubernetes API limits", () => {
  it("accepts the bearer scheme case-insensitively (RFC 9110) and still refuses a wrong token", async () => {
    for (const scheme of ["Bearer", "bearer", "BEARER", "bEaReR"]) {
      expect((await call("GET", "/api/v1/namespaces", `${scheme} ${cluster.token}`)).status, scheme).toBe(200);
    }
    for (const header of [`Bearer ${cluster.token}x`, `Basic ${cluster.token}`, cluster.token, "bearer", undefined]) {
      expect((await call("GET", "/api/v1/namespaces", header)).status, String(header)).toBe(401);
    }
  });

  it("refuses command or args that are not lists of strings with a 422 Invalid Status naming the field", async () => {
    const auth = `Bearer ${cluster.token}`;
    const pod = (container: Record<string, unknown>) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "bad-command" },
      spec: { containers: [{ name: "main", image: "node:22", ...container }] },
    });
    for (const [container, field] of [
      [{ command: 123 }, "spec.containers[0].command"],
      [{ command: ["node", 1] }, "spec.containers[0].command"],
      [{ command: ["node"], args: "-e 1" }, "spec.containers[0].args"],
      [{ command: { 0: "node" } }, "spec.containers[0].command"],
    ] as const) {
      const res = await call("POST", `/api/v1/namespaces/${NS}/pods`, auth, pod(container));
      expect(res.status, JSON.stringify(container)).toBe(422);
      expect(res.json).toMatchObject({ kind: "Status", status: "Failure", reason: "Invalid", code: 422 });
      expect(JSON.stringify(res.json.details)).toContain(field);
    }
    const job = await call("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, auth, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "bad-command" },
      spec: {
        template: { spec: { restartPolicy: "Never", containers: [{ name: "m", image: "node:22", command: 123 }] } },
      },
    });
    expect(job.status).toBe(422);
    expect(JSON.stringify(job.json.details)).toContain("spec.template.spec.containers[0].command");
    expect(cluster.store.list("pods", NS, () => true)).toEqual([]);
    expect(cluster.store.get("jobs", NS, "bad-command")).toBeUndefined();
  });

  it("refuses a volume name that is not a DNS label with a 422 Invalid Status naming the field; the kubelet refuses one that reaches it anyway, making no folder outside the pod's", async () => {
    const auth = `Bearer ${cluster.token}`;
    // Where a kubelet joining the name to its pod folder would land: this file's data folder.
    const escaping = "../".repeat(40) + path.join(dataDir, "escaped").slice(1);
    const spec = (name: string) => ({
      restartPolicy: "Never",
      containers: [
        {
          name: "main",
          image: "node:22",
          command: ["node", "-e", "console.log('ran')"],
          volumeMounts: [{ name, mountPath: "/scratch" }],
        },
      ],
      volumes: [{ name, emptyDir: {} }],
    });
    for (const name of ["../x", escaping, "Data", "a/b", "", "x".repeat(64)]) {
      const res = await call("POST", `/api/v1/namespaces/${NS}/pods`, auth, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "bad-volume" },
        spec: spec(name),
      });
      expect(res.status, name).toBe(422);
      expect(res.json).toMatchObject({ kind: "Status", status: "Failure", reason: "Invalid", code: 422 });
      expect(JSON.stringify(res.json.details)).toContain("spec.volumes[0].name");
    }
    const job = await call("POST", `/apis/batch/v1/namespaces/${NS}/jobs`, auth, {
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { name: "bad-volume" },
      spec: { template: { spec: spec("../x") } },
    });
    expect(job.status).toBe(422);
    expect(JSON.stringify(job.json.details)).toContain("spec.template.spec.volumes[0].name");
    expect(cluster.store.get("pods", NS, "bad-volume")).toBeUndefined();
    // A pod that skipped admission (written to the store directly): the kubelet refuses it before any path is made.
    cluster.store.create("pods", {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "bad-volume", namespace: NS },
      spec: { ...spec(escaping), nodeName: "local-blast-0" },
    });
    const waiting = await eventually(
      async () =>
        (
          cluster.store.get("pods", NS, "bad-volume")?.status as
            | { containerStatuses?: { state?: { waiting?: { reason: string; message: string } } }[] }
            | undefined
        )?.containerStatuses?.[0]?.state?.waiting,
    );
    expect(waiting).toEqual({
      reason: "CreateContainerConfigError",
      message: expect.stringContaining("invalid volume name"),
    });
    expect(existsSync(path.join(dataDir, "escaped"))).toBe(false);
    await call("DELETE", `/api/v1/namespaces/${NS}/pods/bad-volume?gracePeriodSeconds=0`, auth);
  });

  it("refuses to start a container that runAsNonRoot would have run as root, with Kubernetes' reason", async () => {
    const auth = `Bearer ${cluster.token}`;
    const pod = (
      name: string,
      podContext: Record<string, unknown>,
      containerContext: Record<string, unknown> = {},
    ) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name },
      spec: {
        restartPolicy: "Never",
        nodeName: "local-blast-0",
        securityContext: podContext,
        containers: [
          {
            name: "main",
            image: "node:22",
            command: ["node", "-e", "console.log(process.getuid())"],
            securityContext: containerContext,
          },
        ],
      },
    });
    const waitingOf = (name: string) =>
      eventually(async () => {
        const status = cluster.store.get("pods", NS, name)?.status as
          | { containerStatuses?: { state?: { waiting?: { reason: string; message: string } } }[] }
          | undefined;
        return status?.containerStatuses?.[0]?.state?.waiting;
      });
    expect(
      (
        await call(
          "POST",
          `/api/v1/namespaces/${NS}/pods`,
          auth,
          pod("root-by-uid", { runAsNonRoot: true, runAsUser: 0 }),
        )
      ).status,
    ).toBe(201);
    expect(await waitingOf("root-by-uid")).toMatchObject({
      reason: "CreateContainerConfigError",
      message: expect.stringMatching(/^container's runAsUser breaks non-root policy \(pod: "root-by-uid_limits\(/),
    });
    // The container's own securityContext counts too (it overrides the pod's).
    expect(
      (
        await call(
          "POST",
          `/api/v1/namespaces/${NS}/pods`,
          auth,
          pod("root-in-container", {}, { runAsNonRoot: true, runAsUser: 0 }),
        )
      ).status,
    ).toBe(201);
    expect(await waitingOf("root-in-container")).toMatchObject({ reason: "CreateContainerConfigError" });
    if (process.getuid?.() === 0) {
      // Without runAsUser the image's user runs it: locally the kubelet's, here root.
      expect(
        (await call("POST", `/api/v1/namespaces/${NS}/pods`, auth, pod("root-by-image", { runAsNonRoot: true })))
          .status,
      ).toBe(201);
      expect(await waitingOf("root-by-image")).toMatchObject({
        reason: "CreateContainerConfigError",
        message: expect.stringContaining("container has runAsNonRoot and image will run as root"),
      });
    }
    for (const name of ["root-by-uid", "root-in-container", "root-by-image"]) {
      await call("DELETE", `/api/v1/namespaces/${NS}/pods/${name}?gracePeriodSeconds=0`, auth);
    }
  });

  it("runs a container as its securityContext's uid, gid and fsGroup when the kubelet is root, else refuses it with the reason", async () => {
    const auth = `Bearer ${cluster.token}`;
    // What the shard Jobs ask for (jobapi/executors/kubernetes-manifests.ts), with an fsGroup of its own.
    const script = [
      'const fs = require("node:fs");',
      'fs.writeFileSync("written-by-pod", "x");',
      'fs.writeFileSync(require("node:path").join(process.env.HOME, "home-file"), "x");',
      'const status = fs.readFileSync("/proc/self/status", "utf8");',
      "console.log(JSON.stringify({ uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(),",
      '  file: [fs.statSync("written-by-pod").uid, fs.statSync("written-by-pod").gid],',
      "  noNewPrivs: /NoNewPrivs:\\s*1/.test(status), capEff: /CapEff:\\s*(\\w+)/.exec(status)[1] }));",
    ].join("\n");
    const pod = (name: string, workingDir?: string) => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name },
      spec: {
        restartPolicy: "Never",
        nodeName: "local-blast-0",
        securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000 },
        containers: [
          {
            name: "main",
            image: "node:22",
            command: ["node", "-e", script],
            ...(workingDir ? { workingDir } : {}),
            securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ["ALL"] } },
            volumeMounts: [{ name: "scratch", mountPath: "/scratch" }],
          },
        ],
        volumes: [{ name: "scratch", emptyDir: {} }],
      },
    });
    const statusOf = (name: string) =>
      cluster.store.get("pods", NS, name)?.status as
        | { phase?: string; containerStatuses?: { state?: { waiting?: { reason: string; message: string } } }[] }
        | undefined;
    expect((await call("POST", `/api/v1/namespaces/${NS}/pods`, auth, pod("as-1000", "/scratch"))).status).toBe(201);
    if (process.getuid?.() === 0) {
      expect(await eventually(async () => (statusOf("as-1000")?.phase === "Succeeded" ? true : undefined))).toBe(true);
      const report = (await call("GET", `/api/v1/namespaces/${NS}/pods/as-1000/log`, auth)).json;
      expect(report).toEqual({
        uid: 1000,
        gid: 1000,
        // Node's getgroups() lists the effective gid too.
        groups: expect.arrayContaining([1000, 2000]),
        // The emptyDir is the pod's own, group-owned by fsGroup (setgid), as a kubelet makes it.
        file: [1000, 2000],
        noNewPrivs: true,
        capEff: "0000000000000000",
      });
      // A working folder the user cannot enter (the image's: the cluster's 0700 data folder): refused, with the path.
      expect((await call("POST", `/api/v1/namespaces/${NS}/pods`, auth, pod("as-1000-no-access"))).status).toBe(201);
      expect(
        await eventually(async () => statusOf("as-1000-no-access")?.containerStatuses?.[0]?.state?.waiting),
      ).toEqual({
        reason: "CreateContainerError",
        message: expect.stringContaining(`the working folder ${dataDir} is not open to uid 1000 gid 1000`),
      });
    } else {
      // A kubelet that cannot switch users says so rather than run the pod as itself.
      expect(await eventually(async () => statusOf("as-1000")?.containerStatuses?.[0]?.state?.waiting)).toEqual({
        reason: "CreateContainerConfigError",
        message: expect.stringContaining("only a kubelet running as root switches users"),
      });
    }
    for (const name of ["as-1000", "as-1000-no-access"]) {
      await call("DELETE", `/api/v1/namespaces/${NS}/pods/${name}?gracePeriodSeconds=0`, auth);
    }
  });

  it("runs an image whose project folder is closed to the pod's user from the kubelet's copy open to all, as a runtime unpacks an image", async () => {
    const auth = `Bearer ${cluster.token}`;
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "closed-app" },
      spec: {
        restartPolicy: "Never",
        nodeName: "local-blast-0",
        securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 },
        containers: [{ name: "main", image: "registry.local/closed-app:1" }],
      },
    };
    const statusOf = () =>
      cluster.store.get("pods", NS, "closed-app")?.status as
        | { phase?: string; containerStatuses?: { state?: { waiting?: { reason: string; message: string } } }[] }
        | undefined;
    // npm start runs under umask 077 (a private data folder): the copy must still be open to the pod.
    const umask = process.umask(0o077);
    try {
      expect((await call("POST", `/api/v1/namespaces/${NS}/pods`, auth, pod)).status).toBe(201);
      if (process.getuid?.() === 0) {
        expect(await eventually(async () => (statusOf()?.phase === "Succeeded" ? true : undefined))).toBe(true);
      }
    } finally {
      process.umask(umask);
    }
    if (process.getuid?.() === 0) {
      const report = (await call("GET", `/api/v1/namespaces/${NS}/pods/closed-app/log`, auth)).json;
      expect(report.uid).toBe(1000);
      expect(String(report.cwd)).not.toBe(closedImageDir);
    } else {
      expect(await eventually(async () => statusOf()?.containerStatuses?.[0]?.state?.waiting)).toMatchObject({
        reason: "CreateContainerConfigError",
      });
    }
    await call("DELETE", `/api/v1/namespaces/${NS}/pods/closed-app?gracePeriodSeconds=0`, auth);
  });

  it("bounds the change history by bytes: large objects changed often are compacted (410 Gone for older versions)", async () => {
    const auth = `Bearer ${cluster.token}`;
    const before = cluster.store.resourceVersion;
    for (let i = 0; i < 6; i++) {
      const res = await call("POST", `/api/v1/namespaces/${NS}/secrets`, auth, secret(`history-${i}`, 1 * MiB));
      expect(res.status).toBe(201);
    }
    // Six objects of ~1.3 MiB serialized exceed the 4 MiB bound: the oldest changes are gone.
    expect(cluster.store.historySizeBytes).toBeLessThanOrEqual(4 * MiB);
    expect(cluster.store.eventsSince(Number(before))).toBeUndefined();
    const newest = cluster.store.eventsSince(Number(cluster.store.resourceVersion) - 1);
    expect(newest?.length).toBe(1);
  });

  it("drops a watch whose client does not read once its queue passes the bound, and frees it", async () => {
    const url = new URL(cluster.url);
    const socket: TLSSocket = await new Promise((resolve, reject) => {
      const s = connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => resolve(s));
      s.once("error", reject);
    });
    const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    socket.on("error", () => undefined);
    socket.write(
      `GET /api/v1/namespaces/${NS}/secrets?watch=true HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: bearer ${cluster.token}\r\n\r\n`,
    );
    // Wait until the server has the watch open, then stop reading: the server's queue grows.
    await new Promise<void>((resolve) => socket.once("data", () => resolve()));
    socket.pause();
    const dropped = cluster.api.droppedWatches;
    const auth = `Bearer ${cluster.token}`;
    // 2 MiB secrets (2.7 MiB as JSON): the socket buffers fill, then the 1 MiB queue bound is passed.
    for (let i = 0; i < 12 && cluster.api.droppedWatches === dropped; i++) {
      expect((await call("POST", `/api/v1/namespaces/${NS}/secrets`, auth, secret(`flood-${i}`, 2 * MiB))).status).toBe(
        201,
      );
    }
    expect(cluster.api.droppedWatches).toBe(dropped + 1);
    socket.resume();
    await closed;
    // The API still serves everyone else.
    expect((await call("GET", `/api/v1/namespaces/${NS}/secrets`, auth)).status).toBe(200);
    await eventually(async () => (socket.destroyed ? true : undefined));
  });
});
