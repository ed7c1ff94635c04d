import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LOCAL_ARM_WORLD } from "../../local/arm/stack-arm.js";
import { DURABLE_TEST_APP, eventually, mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { alive, childPids } from "../support/processes.js";

const stacks: TestStack[] = [];

afterAll(async () => {
  for (const s of stacks) await s.stop();
  for (const s of stacks) s.cleanup();
});

describe("local stack: kill -9 mid-orchestration, then restart", () => {
  it("resumes the instance from its history, keeps finished activity results and re-runs the interrupted one", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-restart-"));
    const log = path.join(dataDir, "activity.log");
    const release = path.join(dataDir, "release-step-2");
    const env = {
      BLASTPLANE_FUNCTIONS_ENTRY: DURABLE_TEST_APP,
      DURABLE_TEST_LOG: log,
      TEST_TIMER_SCHEDULE: "0 0 0 1 1 *",
    };
    const first = await startStack({ dataDir, inMemory: false, env });
    stacks.push(first);
    const children = childPids(first.info.pid);
    expect(children.length).toBeGreaterThan(0);

    const res = await fetch(`${first.info.durable_rpc_url}orchestrators/longRunning`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      // Step 2 holds until `release` exists, which the test creates only after the restart.
      body: JSON.stringify({ ms: 300, hold: { step: 2, until: release } }),
    });
    const { id } = (await res.json()) as { id: string };
    // Kill while the second activity runs: the first has a recorded result, the second none.
    await eventually(
      async () => (existsSync(log) && readFileSync(log, "utf8").includes("slow start 2") ? true : undefined),
      20_000,
      20,
    );
    await first.kill();
    // The Azurite child notices its parent is gone and shuts down cleanly on its own.
    await eventually(async () => (children.every((pid) => !alive(pid)) ? true : undefined), 15_000);

    // The deploy started on this host reads its rollout at once and then every 30 s (its input keeps
    // the interval): the host is killed within that window, before the rollout can be seen complete.
    const second = await startStack({ dataDir, inMemory: false, env: { ...env, JOB_POLL_INTERVAL_SECONDS: "30" } });
    stacks.push(second);
    writeFileSync(release, "");
    const done = await eventually(async () => {
      const s = (await (await fetch(`${second.info.durable_rpc_url}instances/${id}`)).json()) as {
        runtimeStatus: string;
        output: unknown;
      };
      return s.runtimeStatus === "Completed" ? s : undefined;
    }, 30_000);
    expect(done.output).toEqual([10, 20, 30]);

    const lines = readFileSync(log, "utf8").split("\n");
    const count = (line: string) => lines.filter((l) => l === line).length;
    expect(count("slow start 1")).toBe(1);
    expect(count("slow done 1")).toBe(1);
    expect(count("slow start 2")).toBe(2);
    expect(count("slow done 2")).toBe(1);
    expect(count("slow start 3")).toBe(1);
  }, 120_000);
});

describe("local stack: kill -9 mid-provisioning, mid-build and mid-deploy, then restart", () => {
  it("B-003 B-004 B-027 the provision, build and deploy operations resume after a restart and each ends succeeded once: one cluster, one registry run (even when killed between the registry accepting it and the orchestration recording it), one rollout", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-restart-arm-"));
    const env = {
      BLASTPLANE_LOCAL_ARM: "1",
      BLASTPLANE_SKIP_DEMO_DB: "1",
      // The build and the deploy poll every 5 s: each stays running long enough to be killed mid-way.
      IMAGE_BUILD_POLL_SECONDS: "5",
      JOB_POLL_INTERVAL_SECONDS: "5",
    };
    const stateFile = path.join(dataDir, "arm-state.json");
    type Saved = {
      resources: { id: string; type: string; properties: { provisioningState?: string } }[];
      operations: { resourceId: string; kind: string; status: string }[];
    };
    const saved = (): Saved | undefined =>
      existsSync(stateFile) ? (JSON.parse(readFileSync(stateFile, "utf8")) as Saved) : undefined;
    const clusterId = `/subscriptions/${LOCAL_ARM_WORLD.subscriptionId}/resourceGroups/${LOCAL_ARM_WORLD.resourceGroup}/providers/Microsoft.ContainerService/managedClusters/aks-restart`;
    const call = async (stack: TestStack, method: string, route: string, body?: unknown) => {
      const res = await fetch(`${stack.info.functions_url}/api/${route}`, {
        method,
        headers: {
          Authorization: `Bearer ${await mintToken(stack, "Contributor")}`,
          ...(body ? { "Content-Type": "application/json" } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };

    const first = await startStack({ dataDir, inMemory: false, env });
    stacks.push(first);
    const workspace = await call(first, "PUT", "workspace", {
      subscription_id: LOCAL_ARM_WORLD.subscriptionId,
      resource_group: LOCAL_ARM_WORLD.resourceGroup,
      location: LOCAL_ARM_WORLD.location,
      storage_account: LOCAL_ARM_WORLD.storageAccount,
      registry: LOCAL_ARM_WORLD.registry,
      cluster_name: "aks-restart",
      node_size: "Standard_E8s_v5",
      node_count: 1,
    });
    expect(workspace.status).toBe(200);
    const started = await call(first, "POST", "aks/provision");
    expect(started.status).toBe(200);
    const operationId = (started.body.operation as { operation_id: string }).operation_id;
    // Kill the stack while Resource Manager creates the cluster (its PUT accepted, its operation running).
    await eventually(
      async () =>
        saved()?.resources.some((r) => r.id === clusterId && r.properties.provisioningState === "Creating")
          ? true
          : undefined,
      60_000,
      20,
    );
    await first.kill();
    const atKill = saved();
    expect(atKill?.resources.find((r) => r.id === clusterId)?.properties.provisioningState).toBe("Creating");
    expect(atKill?.operations.filter((o) => o.resourceId === clusterId).map((o) => o.status)).toEqual(["InProgress"]);

    // The deploy started on this host reads its rollout at once and then every 30 s (its input keeps
    // the interval): the host is killed within that window, before the rollout can be seen complete.
    const second = await startStack({ dataDir, inMemory: false, env: { ...env, JOB_POLL_INTERVAL_SECONDS: "30" } });
    stacks.push(second);
    // The image build needs only the saved workspace: it runs while the provision resumes (below).
    const firstBuild = await call(second, "POST", "images/build");
    expect(firstBuild.status).toBe(200);
    const done = await eventually(
      async () => {
        const { body } = await call(second, "GET", `operations/${operationId}`);
        return body.state === "succeeded" || body.state === "failed" ? body : undefined;
      },
      180_000,
      500,
    );
    expect(done).toMatchObject({ state: "succeeded", operation_type: "cluster.provision" });
    const status = await call(second, "GET", "aks/cluster");
    expect(status.body.cluster).toMatchObject({
      power_state: "Running",
      provisioning_state: "Succeeded",
      blast_pool: { vm_size: "Standard_E8s_v5", count: 1 },
    });
    // One cluster, created by one PUT: the resumed step found the creation running and waited for it.
    const clusters = await call(
      second,
      "GET",
      `workspace/choices/clusters?subscription_id=${LOCAL_ARM_WORLD.subscriptionId}`,
    );
    expect((clusters.body.items as { name: string }[]).map((c) => c.name)).toEqual(["aks-restart"]);
    expect(saved()?.operations.filter((o) => o.resourceId === clusterId && o.kind === "put")).toHaveLength(1);

    // B-004 B-027 Then the host is killed while an image build and a job API deploy both run, and
    // each ends once after the restart: one registry run for the build, one rollout for the deploy.
    const operationOf = (started: { body: Record<string, unknown> }) =>
      (started.body.operation as { operation_id: string }).operation_id;
    const ended = (stack: TestStack, id: string) =>
      eventually(
        async () => {
          const { body } = await call(stack, "GET", `operations/${id}`);
          return body.state === "succeeded" || body.state === "failed" ? body : undefined;
        },
        300_000,
        500,
      );
    const runs = () =>
      (saved()?.resources ?? []).filter((r) => r.type === "Microsoft.ContainerRegistry/registries/runs");
    const built = await ended(second, operationOf(firstBuild));
    expect(built).toMatchObject({ state: "succeeded" });
    const digest = (built.progress as { image_digest: string }).image_digest;
    expect(runs()).toHaveLength(1);
    const stepOf = async (id: string) =>
      ((await call(second, "GET", `operations/${id}`)).body.progress as { step?: string } | undefined)?.step;
    // A deploy of the first build's image, killed while it waits for the rollout…
    const deploy = operationOf(await call(second, "POST", "jobapi/deploy", { image_digest: digest }));
    await eventually(async () => ((await stepOf(deploy)) === "rollout" ? true : undefined), 120_000, 50);
    // …and a second build, killed the moment the registry has accepted its run, while the schedule
    // activity still waits for the registry's scheduling operation (so the orchestration has not
    // recorded the run): the resumed activity must find that run rather than schedule another.
    const build = operationOf(await call(second, "POST", "images/build"));
    await eventually(async () => (runs().length === 2 ? true : undefined), 120_000, 5);
    // The premise of what follows: the deploy is still waiting for its rollout when the host dies.
    expect(await stepOf(deploy)).toBe("rollout");
    await second.kill();
    const atSchedule = saved();
    expect(runs()).toHaveLength(2);
    const runAtKill = runs()[1] as unknown as { properties: { status?: string } };
    expect(runAtKill.properties.status).toBe("Queued");
    expect(
      atSchedule?.operations.filter((o) => o.status === "InProgress" && /\/registries\//i.test(o.resourceId)),
    ).toHaveLength(1);

    // The restarted host's local cluster starts empty: the resumed deploy applies once more and rolls out.
    const third = await startStack({ dataDir, inMemory: false, env });
    stacks.push(third);
    const [rebuilt, redeployed] = await Promise.all([ended(third, build), ended(third, deploy)]);
    expect(rebuilt).toMatchObject({
      state: "succeeded",
      progress: { image_digest: expect.stringMatching(/^sha256:/) },
    });
    // B-004 One registry run for the second build: the one accepted before the kill.
    expect(runs()).toHaveLength(2);
    expect(redeployed).toMatchObject({ state: "succeeded", progress: { step: "done", image_digest: digest } });
    const deployment = await call(third, "GET", "jobapi/deployment");
    expect(deployment.body.rollout).toMatchObject({
      state: "complete",
      generation: 1,
      available_replicas: 1,
      pods: [expect.objectContaining({ ready: true })],
    });
  }, 900_000);
});

describe("local stack start-up", () => {
  it("names the busy port and the setting to change when a listener's port is taken", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as AddressInfo).port;
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-busy-"));
    try {
      const child = spawn(process.execPath, [path.join(ROOT, "dist/local/start.js")], {
        cwd: ROOT,
        env: {
          ...process.env,
          BLASTPLANE_DATA_DIR: dataDir,
          BLASTPLANE_SKIP_DEMO_DB: "1",
          PORT: "0",
          IDP_PORT: "0",
          JOBAPI_PORT: String(port),
        },
        stdio: ["ignore", "ignore", "pipe"],
      });
      let stderr = "";
      child.stderr.on("data", (c) => {
        stderr += c;
      });
      const [code] = (await once(child, "exit")) as [number | null];
      expect(code).toBe(1);
      expect(stderr).toContain(`Port ${port} is already in use`);
      expect(stderr).toContain(`JOBAPI_PORT=${port + 100} npm start`);
    } finally {
      blocker.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
