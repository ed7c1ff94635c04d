import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import type { Caller } from "../../shared/auth/roles.js";
import type { DatabaseManifest } from "../../shared/blast/database-builder.js";
import type { DatabaseCatalog, DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { createDatabaseService } from "../../shared/databases/database-service.js";
import { DatabaseStateStore } from "../../shared/databases/database-state.js";
import {
  DependencyUnavailableError,
  ForbiddenError,
  NotFoundError,
  PreconditionFailedError,
  PreconditionRequiredError,
  QueueFullError,
} from "../../shared/errors.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { createDiagnosticsService } from "../../shared/orchestrations/diagnostics-service.js";
import { createEventLog } from "../../shared/ops/events.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { createFixedWindowLimiter } from "../../shared/http/rate-limiter.js";
import { createReadinessCheck } from "../../shared/http/readiness.js";
import { createApiTokenSettings } from "../../shared/secrets/api-token-settings.js";
import { ApiTokenService, createFileSecretStore } from "../../shared/secrets/api-tokens.js";
import { createWorkspaceStore, type Workspace } from "../../shared/workspace/workspace.js";
import { createWorkspaceService } from "../../shared/workspace/workspace-service.js";
import { captureLogger, fakeOrchestrations, prefixedTables, testAzurite } from "../support/service-fakes.js";

let azurite: RunningAzurite;
let counter = 0;
const folders: string[] = [];

beforeAll(async () => {
  azurite = await testAzurite();
});

afterAll(async () => {
  await azurite?.stop();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

/** Tables of their own on Azurite for one test. */
function tables() {
  return prefixedTables(azurite.connectionString, `svc${++counter}x${Date.now().toString(36)}`);
}

const contributor: Caller = { oid: "oid-cora", name: "Cora", tenant_id: "t", roles: ["Contributor"] };
const owner: Caller = { oid: "oid-olga", name: "Olga", tenant_id: "t", roles: ["Owner"] };

describe("database service", () => {
  const release = (name: string, version: string): DatabaseEntry => ({
    manifest: {
      name,
      type: "nucl",
      version,
      letters: 10,
      sequences: 2,
      bytes: 100,
      volumes: 1,
      bytes_to_cache: 50,
      path: `full/${name}`,
      partitions: [],
      created_at: "2026-01-01T00:00:00Z",
    } as DatabaseManifest,
    root: `/databases/${name}/${version}`,
    location: `local://databases/${name}/${version}`,
  });
  /** The prepared releases the service sees (the file catalog is tested with real releases elsewhere). */
  const catalog = (entries: DatabaseEntry[]): DatabaseCatalog => ({
    list: async () => entries,
    get: async (name) => entries.find((entry) => entry.manifest.name === name),
    hold: async () => {},
    release: async () => {},
  });

  function setup(entries: DatabaseEntry[], options: { sourceConfigured?: boolean; catalogConfigured?: boolean } = {}) {
    const source = tables();
    const states = new DatabaseStateStore(source("dbstate"));
    const audit = createAuditLog(source);
    const hub = fakeOrchestrations();
    const service = createDatabaseService({
      catalog: options.catalogConfigured === false ? undefined : catalog(entries),
      states,
      orchestrations: hub.client,
      audit,
      logger: captureLogger(),
      sourceConfigured: options.sourceConfigured ?? true,
      partitions: 3,
    });
    return { service, states, audit, hub };
  }

  it("lists each release with the warm-up state of the release serving and no update flag for the release now serving", async () => {
    const { service, states } = setup([
      release("alpha", "2026-02-01-00-00-00"),
      release("beta", "2026-02-02-00-00-00"),
      release("gamma", "2026-02-03-00-00-00"),
    ]);
    await states.patch("alpha", {
      warm_state: "warm",
      warmed_version: "2026-02-01-00-00-00",
      warmed_at: "2026-02-01T01:00:00.000Z",
      update_available: true,
      latest_release: "2026-03-01-00-00-00",
    });
    // beta was warmed and flagged before its current release was prepared.
    await states.patch("beta", {
      warm_state: "warm",
      warmed_version: "2026-01-01-00-00-00",
      warmed_at: "2026-01-01T01:00:00.000Z",
      update_available: true,
      latest_release: "2026-02-02-00-00-00",
    });
    await states.patch("gamma", { warm_state: "warming" });
    const listed = Object.fromEntries((await service.list()).map((database) => [database.name, database]));
    expect(listed.alpha).toMatchObject({
      version: "2026-02-01-00-00-00",
      warm_state: "warm",
      warmed_at: "2026-02-01T01:00:00.000Z",
      update_available: true,
      latest_release: "2026-03-01-00-00-00",
    });
    expect(listed.beta).toMatchObject({ warm_state: "cold", warmed_at: null, update_available: false });
    expect(listed.gamma).toMatchObject({ warm_state: "warming", update_available: false, checked_at: null });
  });

  it("starts prepare and warm-up as audited operations, and refuses what it cannot do before starting anything", async () => {
    const { service, hub, audit } = setup([release("alpha", "2026-02-01-00-00-00")]);
    const prepared = await service.prepare(contributor, "alpha", { requestId: "req-prepare" });
    expect(prepared).toMatchObject({
      operation_type: "database.prepare",
      state: "queued",
      poll_after_seconds: 5,
      target: { resource_type: "blast_database", name: "alpha" },
    });
    const warmed = await service.warmUp(contributor, "alpha", { requestId: "req-warm" });
    expect(hub.starts).toEqual([
      {
        name: Orchestrations.prepareDatabase,
        options: { instanceId: prepared.operation_id, input: { name: "alpha", partitions: 3 } },
      },
      { name: Orchestrations.warmDatabase, options: { instanceId: warmed.operation_id, input: { name: "alpha" } } },
    ]);
    const entries = await audit.list();
    expect(entries.map((entry) => [entry.action, entry.request_id, entry.details])).toEqual(
      expect.arrayContaining([
        ["database.prepare", "req-prepare", { operation_id: prepared.operation_id }],
        ["database.warmup", "req-warm", { operation_id: warmed.operation_id }],
      ]),
    );

    await expect(service.warmUp(contributor, "nope", { requestId: "r" })).rejects.toBeInstanceOf(NotFoundError);
    await expect(
      setup([], { sourceConfigured: false }).service.prepare(contributor, "alpha", { requestId: "r" }),
    ).rejects.toThrow(/DATABASE_SOURCE_URL/);
    await expect(setup([], { catalogConfigured: false }).service.list()).rejects.toBeInstanceOf(
      DependencyUnavailableError,
    );
    expect(hub.starts).toHaveLength(2);
  });
});

describe("task-queue diagnostics service", () => {
  function setup(limit = 10) {
    const hub = fakeOrchestrations();
    const service = createDiagnosticsService({
      orchestrations: hub.client,
      taskHubName: "blastplane",
      noopLimiter: createFixedWindowLimiter(limit, 60_000),
      logger: captureLogger(),
    });
    return { service, hub };
  }

  it("B-134 counts pending and running instances per queue label, from the task hub", async () => {
    const { service, hub } = setup();
    hub.put({ name: Orchestrations.submitBlastJob, instanceId: "a", runtimeStatus: "Running" });
    hub.put({ name: Orchestrations.prepareDatabase, instanceId: "b", runtimeStatus: "Pending" });
    hub.put({ name: Orchestrations.submitBlastJob, instanceId: "c", runtimeStatus: "Completed" });
    expect((await service.getQueueDiagnostics()).queues).toEqual({
      default: 0,
      cloud: 0,
      blast: 1,
      storage: 1,
      fallback: 0,
    });
  });

  it("enqueues a no-op that the queues count, refuses beyond the rate limit with the wait, and reports its result", async () => {
    const { service, hub } = setup(1);
    const enqueued = await service.enqueueNoop("ping");
    expect(enqueued).toMatchObject({ status: "PENDING", queues: { cloud: 1 } });
    expect(hub.starts).toEqual([{ name: Orchestrations.noop, options: { input: { message: "ping" } } }]);
    const refused = await service.enqueueNoop("again").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(QueueFullError);
    expect((refused as QueueFullError).retryAfterSeconds).toBeGreaterThan(0);
    expect(hub.starts).toHaveLength(1);

    expect(await service.getNoopResult(enqueued.task_id)).toEqual({
      task_id: enqueued.task_id,
      status: "PENDING",
      result: null,
    });
    hub.put({
      name: Orchestrations.noop,
      instanceId: enqueued.task_id,
      runtimeStatus: "Completed",
      output: { message: "ping" },
    });
    expect(await service.getNoopResult(enqueued.task_id)).toEqual({
      task_id: enqueued.task_id,
      status: "SUCCESS",
      result: { message: "ping" },
    });
    hub.put({ name: Orchestrations.noop, instanceId: "failed-one", runtimeStatus: "Failed", output: "boom" });
    expect(await service.getNoopResult("failed-one")).toEqual({
      task_id: "failed-one",
      status: "FAILURE",
      result: null,
      error: "boom",
    });
  });

  it("shows no other orchestration as a task", async () => {
    const { service, hub } = setup();
    hub.put({ name: Orchestrations.submitBlastJob, instanceId: "op-1", runtimeStatus: "Running" });
    await expect(service.getNoopResult("op-1")).rejects.toBeInstanceOf(NotFoundError);
    await expect(service.getNoopResult("missing")).rejects.toBeInstanceOf(NotFoundError);
  });
});

describe("readiness check", () => {
  it("answers ready with every check ok, or a DependencyUnavailableError naming each dependency that did not answer in time", async () => {
    const ok = () => Promise.resolve();
    const logger = captureLogger();
    const ready = createReadinessCheck({
      probes: [
        { key: "storage", label: "storage", probe: ok },
        { key: "durable_backend", label: "durable backend", probe: ok },
      ],
      timeoutMs: 1000,
      logger,
    });
    expect(await ready.check()).toEqual({ status: "ready", checks: { storage: "ok", durable_backend: "ok" } });

    const notReady = createReadinessCheck({
      probes: [
        { key: "storage", label: "storage", probe: () => Promise.reject(new Error("ECONNREFUSED 127.0.0.1:10002")) },
        { key: "durable_backend", label: "durable backend", probe: () => new Promise(() => {}) },
      ],
      timeoutMs: 100,
      logger,
    });
    const error = await notReady.check().catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as DependencyUnavailableError).message).toBe("not ready: storage and durable backend unreachable");
    expect((error as DependencyUnavailableError).retryAfterSeconds).toBe(5);
    // The causes go to the log only.
    expect(logger.entries).toContainEqual({
      level: "warn",
      msg: "not ready",
      fields: expect.objectContaining({
        storage: "ECONNREFUSED 127.0.0.1:10002",
        durable_backend: "no answer within 100 ms",
      }),
    });
  });
});

describe("workspace service", () => {
  const workspace: Workspace = {
    subscription_id: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
    resource_group: "rg-blast",
    location: "westeurope",
    storage_account: "blaststore01",
    registry: "blastacr01",
    cluster_name: "aks-blast",
    node_size: "Standard_D4s_v5",
    node_count: 3,
  };

  it("B-002 saves with optimistic concurrency and audits every save and every refusal of a version", async () => {
    const source = tables();
    const audit = createAuditLog(source);
    const service = createWorkspaceService({ store: createWorkspaceStore(source), audit });
    await expect(service.get()).rejects.toBeInstanceOf(NotFoundError);
    const first = await service.save(contributor, workspace, { ifMatch: undefined, requestId: "req-1" });
    expect(first).toMatchObject({ workspace, updated_by: { oid: contributor.oid, name: "Cora" } });
    expect(first).not.toHaveProperty("previous");
    expect(await service.get()).toEqual(first);

    await expect(
      service.save(contributor, workspace, { ifMatch: undefined, requestId: "req-2" }),
    ).rejects.toBeInstanceOf(PreconditionRequiredError);
    const second = await service.save(
      owner,
      { ...workspace, node_count: 4 },
      { ifMatch: first.etag, requestId: "req-3" },
    );
    await expect(
      service.save(contributor, { ...workspace, node_count: 9 }, { ifMatch: first.etag, requestId: "req-4" }),
    ).rejects.toBeInstanceOf(PreconditionFailedError);
    expect((await service.get()).etag).toBe(second.etag);

    const byRequest = Object.fromEntries(
      (await audit.list({ action: "workspace.update" })).map((entry) => [entry.request_id, entry]),
    );
    expect(byRequest["req-1"]).toMatchObject({
      outcome: "succeeded",
      details: { created: true, changed_fields: Object.keys(workspace), etag: first.etag },
    });
    expect(byRequest["req-2"]).toMatchObject({ outcome: "failed", details: { error: "PreconditionRequiredError" } });
    expect(byRequest["req-3"]).toMatchObject({
      outcome: "succeeded",
      actor: { oid: owner.oid },
      details: { created: false, changed_fields: ["node_count"] },
    });
    expect(byRequest["req-4"]).toMatchObject({
      outcome: "failed",
      details: { error: "PreconditionFailedError", reason: expect.stringContaining("changed") },
    });
  });
});

describe("API token settings", () => {
  function setup() {
    const folder = mkdtempSync(path.join(tmpdir(), "token-settings-"));
    folders.push(folder);
    const source = tables();
    const audit = createAuditLog(source);
    const events = createEventLog(source);
    let now = new Date("2030-01-01T00:00:00.000Z");
    const tokens = new ApiTokenService(createFileSecretStore(folder), { now: () => now });
    const settings = createApiTokenSettings({
      tokens,
      audit,
      events,
      logger: captureLogger(),
      graceSeconds: 600,
      now: () => now,
    });
    return { settings, audit, events, advance: (ms: number) => (now = new Date(now.getTime() + ms)) };
  }

  it("refuses reveal and regenerate below Owner and audits each refusal with who tried", async () => {
    const { settings, audit } = setup();
    await expect(settings.reveal(contributor, { requestId: "req-reveal" })).rejects.toBeInstanceOf(ForbiddenError);
    await expect(settings.regenerate(contributor, { requestId: "req-regen" })).rejects.toBeInstanceOf(ForbiddenError);
    const entries = await audit.list();
    expect(entries.map((entry) => [entry.action, entry.outcome, entry.actor.oid, entry.details])).toEqual(
      expect.arrayContaining([
        ["api_token.reveal", "denied", contributor.oid, { roles: ["Contributor"] }],
        ["api_token.regenerate", "denied", contributor.oid, { roles: ["Contributor"] }],
      ]),
    );
    expect(await settings.getStatus()).toEqual({
      configured: false,
      last_four: null,
      created_at: null,
      rotated_at: null,
      previous_valid_until: null,
    });
  });

  it("regenerates (predecessor valid for the grace), reveals, and keeps the token out of audit and events", async () => {
    const { settings, audit, events, advance } = setup();
    await expect(settings.reveal(owner, { requestId: "r0" })).rejects.toBeInstanceOf(NotFoundError);
    const first = await settings.regenerate(owner, { requestId: "r1" });
    advance(1000);
    const second = await settings.regenerate(owner, { requestId: "r2" });
    expect(second.previous).toEqual({
      value: first.current.value,
      rotated_at: "2030-01-01T00:00:01.000Z",
      valid_until: "2030-01-01T00:10:01.000Z",
    });
    expect(await settings.reveal(owner, { requestId: "r3" })).toBe(second.current.value);
    expect(await settings.getStatus()).toEqual({
      configured: true,
      last_four: second.current.value.slice(-4),
      created_at: "2030-01-01T00:00:01.000Z",
      rotated_at: "2030-01-01T00:00:01.000Z",
      previous_valid_until: "2030-01-01T00:10:01.000Z",
    });
    advance(600_000);
    expect((await settings.getStatus()).previous_valid_until).toBeNull();

    const recorded = JSON.stringify([await audit.list(), await events.list()]);
    for (const token of [first.current.value, second.current.value]) expect(recorded).not.toContain(token);
    const rotations = (await events.list()).filter((event) => event.event_type === "token.rotated");
    expect(rotations.map((event) => event.correlation_id).sort()).toEqual(["r1", "r2"]);
    expect(
      (await audit.list({ action: "api_token.reveal" })).map((entry) => [entry.outcome, entry.request_id]),
    ).toEqual([["succeeded", "r3"]]);
  });
});

describe("per-client rate limit", () => {
  it("B-239 gives each client its own window, and an overall ceiling still holds", async () => {
    const { createPerClientLimiter } = await import("../../shared/http/rate-limiter.js");
    let t = 0;
    const limiter = createPerClientLimiter(2, 60_000, { overallFactor: 2, now: () => t });
    expect([limiter.take("a"), limiter.take("a"), limiter.take("a")]).toEqual([0, 0, 60]);
    expect([limiter.take("b"), limiter.take("b")]).toEqual([0, 0]);
    // Four taken overall (the ceiling): a third client waits too.
    expect(limiter.take("c")).toBe(60);
    t = 60_000;
    expect(limiter.take("a")).toBe(0);
  });
});
