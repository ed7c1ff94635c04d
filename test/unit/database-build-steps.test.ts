import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { type CloudAuthorizationFailure, explainCloudAuthorization } from "../../shared/auth/cloud-authorization.js";
import {
  type AddStep,
  addProgressFromClaim,
  addStepTracker,
  initialAddSteps,
  parseAddSteps,
} from "../../shared/databases/build-steps.js";
import { createAddDatabaseActivity } from "../../shared/databases/database-activities.js";
import type { DatabaseNameClaims } from "../../shared/databases/name-claims.js";
import type { DatabaseUploadStore } from "../../shared/databases/upload-store.js";
import { createLogger } from "../../shared/logging/logger.js";
import { describeOperation } from "../../shared/orchestrations/operations.js";
import type { OrchestrationClient, OrchestrationInstance } from "../../shared/orchestrations/orchestration-client.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { formatTime } from "../../web/src/format.js";
import { addStepLines } from "../../web/src/pages/database-words.js";

const T0 = "2026-11-28T00:00:00.000Z";
const at = new Date(T0);

function oneInstance(instance: OrchestrationInstance): OrchestrationClient {
  return {
    getInstance: async (id: string) => (id === instance.instanceId ? instance : undefined),
  } as unknown as OrchestrationClient;
}

const building = (over: Partial<OrchestrationInstance>): OrchestrationInstance => ({
  name: Orchestrations.addDatabase,
  instanceId: "op-add",
  runtimeStatus: "Running",
  input: { name: "my16s", type: "nucl", partitions: 2, upload: "op-add.fa" },
  output: null,
  createdAt: at,
  lastUpdatedAt: at,
  customStatus: { phase: "building" },
  ...over,
});

describe("adding a database reports its steps (issue 23)", () => {
  it("starts with the upload checked, partitions skipped when the database is not partitioned", () => {
    expect(initialAddSteps(true, T0)).toEqual([
      { name: "upload_checked", state: "succeeded", at: T0 },
      { name: "makeblastdb", state: "pending" },
      { name: "partitions", state: "pending" },
      { name: "published", state: "pending" },
    ]);
    expect(initialAddSteps(false, T0)[2]).toEqual({ name: "partitions", state: "skipped" });
  });

  it("moves through the steps, saving each change, and a failure lands on the step that was running", async () => {
    const saved: string[] = [];
    let tick = 0;
    const tracker = addStepTracker(
      initialAddSteps(false, T0),
      async (steps) => {
        saved.push(steps.map((s) => `${s.name}=${s.state}`).join(","));
      },
      () => new Date(at.getTime() + ++tick * 1000),
    );
    await tracker.start("makeblastdb");
    await tracker.succeed("makeblastdb");
    // A skipped step stays skipped whatever the build says.
    await tracker.start("partitions");
    await tracker.start("published");
    await tracker.fail("the release store refused the upload");
    expect(saved).toEqual([
      "upload_checked=succeeded,makeblastdb=running,partitions=skipped,published=pending",
      "upload_checked=succeeded,makeblastdb=succeeded,partitions=skipped,published=pending",
      "upload_checked=succeeded,makeblastdb=succeeded,partitions=skipped,published=running",
      "upload_checked=succeeded,makeblastdb=succeeded,partitions=skipped,published=failed",
    ]);
    expect(tracker.steps[3]).toEqual({
      name: "published",
      state: "failed",
      at: "2026-11-28T00:00:04.000Z",
      error: "the release store refused the upload",
    });
  });

  it("reads stored steps back, and nothing from malformed text", () => {
    const steps = initialAddSteps(true, T0);
    expect(parseAddSteps(JSON.stringify(steps))).toEqual(steps);
    expect(parseAddSteps("{not json")).toBeUndefined();
    expect(parseAddSteps(JSON.stringify([{ name: "rm -rf", state: "running" }]))).toBeUndefined();
    expect(parseAddSteps(undefined)).toBeUndefined();
  });

  it("the operation shows the steps its build recorded while it runs, and those of its result once it ended", async () => {
    const recorded: AddStep[] = [...initialAddSteps(true, T0)];
    recorded[1] = { name: "makeblastdb", state: "running", at: T0 };
    const claims = {
      get: async (name: string) => (name === "my16s" ? { operation_id: "op-add", steps: recorded } : undefined),
    };
    const liveProgress = (instance: OrchestrationInstance) => addProgressFromClaim(claims, instance);

    const running = await describeOperation(oneInstance(building({})), "op-add", { pollAfterSeconds: 5, liveProgress });
    expect(running).toMatchObject({ operation_type: "database.add", state: "running", progress: { steps: recorded } });

    // A claim now held by another upload of the name is not this operation's progress.
    const other = await describeOperation(oneInstance(building({ instanceId: "op-old" })), "op-old", {
      pollAfterSeconds: 5,
      liveProgress,
    });
    expect(other?.progress).toBeUndefined();

    const finalSteps = initialAddSteps(true, T0).map((s) => ({ ...s, state: "succeeded" }));
    let asked = false;
    const done = await describeOperation(
      oneInstance(
        building({
          runtimeStatus: "Completed",
          output: { outcome: "succeeded", name: "my16s", version: "2026-11-28-00-00-05", steps: finalSteps },
        }),
      ),
      "op-add",
      {
        pollAfterSeconds: 5,
        liveProgress: async () => {
          asked = true;
          return undefined;
        },
      },
    );
    expect(done).toMatchObject({ state: "succeeded", progress: { steps: finalSteps } });
    expect(asked).toBe(false);

    // The claims table unreadable: the poll still answers the operation, without live steps.
    const unreadable = await describeOperation(oneInstance(building({})), "op-add", {
      pollAfterSeconds: 5,
      liveProgress: async () => {
        throw new Error("table unavailable");
      },
    });
    expect(unreadable).toMatchObject({ operation_type: "database.add", state: "running" });
    expect(unreadable?.progress).toBeUndefined();

    // Other operations are not read from claims.
    expect(await addProgressFromClaim(claims, building({ name: Orchestrations.warmDatabase }))).toBeUndefined();
  });

  it("the Databases page lists each step with its state and time", () => {
    const lines = addStepLines({
      steps: [
        { name: "upload_checked", state: "succeeded", at: T0 },
        { name: "makeblastdb", state: "running", at: T0 },
        { name: "partitions", state: "skipped" },
        { name: "published", state: "failed", at: T0, error: "no space left" },
        { name: "unknown", state: "running" },
      ],
    });
    expect(lines).toEqual([
      `Upload checked: succeeded (${formatTime(T0)})`,
      `makeblastdb: running (since ${formatTime(T0)})`,
      "Partitions: skipped (not partitioned)",
      `Published: failed (${formatTime(T0)}) — no space left`,
    ]);
    expect(addStepLines(undefined)).toEqual([]);
  });
});

describe("a database build refused by Azure for a missing role (issue 23, review)", () => {
  it("(R-RBAC-001) is thrown on so the activity's wrapper reports the role to assign; the upload is removed (the orchestration then lets the name's claim go)", async () => {
    const deleted: string[] = [];
    const refusal = Object.assign(
      new Error("This request is not authorized to perform this operation using this permission."),
      {
        statusCode: 403,
        code: "AuthorizationPermissionMismatch",
        request: { url: "https://workload.blob.core.windows.net/uploads/op-add.fa" },
      },
    );
    const activity = createAddDatabaseActivity({
      databasesDir: () => "/nonexistent",
      source: () => {
        throw new Error("not used");
      },
      catalog: () => {
        throw new Error("not used");
      },
      state: { patch: async () => undefined },
      events: { record: async () => ({}) as never },
      logger: createLogger({ level: "error", write: () => undefined }),
      now: () => at,
      buildRoot: () => mkdtempSync(path.join(tmpdir(), "bp-add-refused-")),
      uploads: () =>
        ({
          downloadToFile: async () => {
            throw refusal;
          },
          delete: async (name: string) => {
            deleted.push(name);
          },
        }) as unknown as DatabaseUploadStore,
      claims: () =>
        ({
          get: async () => undefined,
          recordSteps: async () => undefined,
        }) as unknown as DatabaseNameClaims,
    });
    const reported: CloudAuthorizationFailure[] = [];
    const wrapped = explainCloudAuthorization(activity, async (failure) => {
      reported.push(failure);
    });
    const input = { name: "my16s", type: "nucl" as const, partitions: 1, upload: "op-add.fa" };
    await expect(wrapped(input)).rejects.toThrow(/assign it the Storage Blob Data Contributor role/);
    expect(reported.map((r) => r.role)).toEqual(["Storage Blob Data Contributor"]);
    expect(deleted).toEqual(["op-add.fa"]);
  });
});
