import { describe, expect, it } from "vitest";
import { actionModes } from "../../shared/ops/actions/action-settings.js";
import { ActionInProgressError, ActionStateChangedError } from "../../shared/ops/actions/action-executor.js";
import { actionOutcomeHash } from "../../shared/ops/actions/action-outcomes.js";
import { CANCEL_EVENT, Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import { actionTestFolder, actionWorld, APPROVER, QUERY, replayContext } from "../support/action-world.js";
import { actions, callerWith } from "../support/console-harness.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("act");
const folder = actionTestFolder();

const world = (options: Parameters<typeof actionWorld>[2] = {}) =>
  actionWorld(azurite.connectionString(), folder.databasesDir(), options);
const context = replayContext;
/** Fails right after the real call succeeded, as a host that crashed before recording would. */
const crashAfter = <F extends (...args: never[]) => Promise<unknown>>(call: F): F =>
  (async (...args: Parameters<F>) => {
    await call(...args);
    throw new Error("host crashed after acting");
  }) as unknown as F;

describe("action modes", () => {
  it("come from the catalog's default_mode unless configured; an override for an unknown action type refuses to load", () => {
    const defaults = actionModes(actions, {});
    expect(actions.action_types.map((a) => [a.id, defaults(a.id)])).toEqual(
      actions.action_types.map((a) => [a.id, a.default_mode]),
    );
    expect(actionModes(actions, { retry_job: "enforce" })("retry_job")).toBe("enforce");
    expect(() => actionModes(actions, { reboot_everything: "enforce" })).toThrow(
      /reboot_everything is not an action type/,
    );
  });
});

describe("retry_job", () => {
  it("approved in enforce mode: resubmits the failed job's search once through the submit path as a new job linked to it; a replay with the same key submits nothing", async () => {
    const w = await world();
    const failed = await w.jobIn("failed");
    const startsBefore = w.hub.starts.length;
    const item = await w.approve({ action_type: "retry_job", target: `blast_job/${failed.job_id}`, params: {} });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "enforce", executed: true, retry_of: failed.job_id },
    });
    const result = item.execution?.result as { job_id: string; operation_id: string };
    expect(result.job_id).not.toBe(failed.job_id);
    const retried = await w.jobs.get(result.job_id);
    expect(retried).toMatchObject({
      program: failed.program,
      db: failed.db,
      blast_options: failed.blast_options,
      execution_profile: failed.execution_profile,
      priority: failed.priority,
      title: "Retry of the original",
      created_by: { oid: APPROVER.oid },
    });
    expect(await w.jobs.query(result.job_id)).toBe(QUERY);
    expect(w.hub.starts.slice(startsBefore)).toEqual([
      {
        name: Orchestrations.submitBlastJob,
        options: {
          instanceId: result.operation_id,
          input: expect.objectContaining({ dashboard_job_id: result.job_id }),
        },
      },
    ]);
    // The failed job is kept as it was.
    expect((await w.jobs.get(failed.job_id))?.status).toBe("failed");

    const replay = await w.executor.execute(
      { action_type: "retry_job", target: `blast_job/${failed.job_id}`, params: {} },
      context(item.approval_id),
    );
    expect(replay).toEqual(item.execution?.result);
    expect(w.hub.starts.length).toBe(startsBefore + 1);
    expect((await w.jobs.list({ page: 1, pageSize: 50 })).total).toBe(2);
    const audited = await w.executions();
    expect(audited).toHaveLength(1);
    expect(audited[0]).toMatchObject({
      actor: APPROVER,
      target: `blast_job/${failed.job_id}`,
      outcome: "succeeded",
      details: { action_type: "retry_job", mode: "enforce", idempotency_key: item.approval_id },
    });
  });

  it("in shadow mode (the catalog's default) records what it would submit and submits nothing", async () => {
    const w = await world({ modes: {} });
    const failed = await w.jobIn("failed");
    const startsBefore = w.hub.starts.length;
    const item = await w.approve({ action_type: "retry_job", target: `blast_job/${failed.job_id}`, params: {} });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: {
        mode: "shadow",
        executed: false,
        would: { retry_of: failed.job_id, program: "blastn", db: "actdemo", title: "Retry of the original" },
      },
    });
    expect(w.hub.starts.length).toBe(startsBefore);
    expect((await w.jobs.list({ page: 1, pageSize: 50 })).total).toBe(1);
    expect(await w.executions()).toMatchObject([
      { outcome: "succeeded", details: { mode: "shadow", result: { executed: false } } },
    ]);
  });

  it("refuses (typed, audited once) when the job is no longer failed at execution; a replay answers the same refusal", async () => {
    const w = await world();
    const job = await w.jobIn("failed");
    const action = { action_type: "retry_job", target: `blast_job/${job.job_id}`, params: {} };
    expect((await w.verify(action)).verdict).toBe("eligible");
    // Between verification and execution someone else retried it by hand and it completed.
    await w.jobs.update(job.job_id, (j) => ({ ...j, status: "completed" }));
    const startsBefore = w.hub.starts.length;
    const refusal = await w.executor.execute(action, context("key-changed")).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(ActionStateChangedError);
    expect(refusal).toMatchObject({
      observed: { status: "completed" },
      message: expect.stringContaining("no longer failed"),
    });
    await expect(w.executor.execute(action, context("key-changed"))).rejects.toBeInstanceOf(ActionStateChangedError);
    expect(w.hub.starts.length).toBe(startsBefore);
    expect(await w.executions()).toMatchObject([
      { outcome: "denied", details: { action_type: "retry_job", observed: { status: "completed" } } },
    ]);
  });

  it("a host that crashed after submitting and before recording resumes its plan: one new job, not two", async () => {
    let crash = true;
    const w = await world({ wrapJobs: (s) => (crash ? { ...s, submit: crashAfter(s.submit) } : s) });
    const failed = await w.jobIn("failed");
    const action = { action_type: "retry_job", target: `blast_job/${failed.job_id}`, params: {} };
    await expect(w.executor.execute(action, context("key-crash"))).rejects.toThrow("host crashed after acting");
    crash = false;
    const resumed = (await w.executor.execute(action, context("key-crash"))) as { job_id: string };
    const { jobs, total } = await w.jobs.list({ page: 1, pageSize: 50 });
    expect(total).toBe(2);
    expect(jobs.map((j) => j.job_id)).toContain(resumed.job_id);
    expect((await w.executions()).map((e) => e.outcome)).toEqual(["failed", "succeeded"]);
  });
});

describe("cancel_job", () => {
  it("approved in enforce mode: the dashboard's cancel path (cancel flag and the orchestration's cancel event), once; a replay raises nothing", async () => {
    const w = await world();
    const running = await w.jobIn("running");
    const item = await w.approve({ action_type: "cancel_job", target: `blast_job/${running.job_id}`, params: {} });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "enforce", executed: true, job_id: running.job_id, cancel_requested: true },
    });
    expect(w.hub.events).toEqual([
      { instanceId: running.operation_id, eventName: CANCEL_EVENT, eventData: { by: APPROVER.oid } },
    ]);
    expect((await w.jobs.get(running.job_id))?.cancel_requested).toBe(true);
    await w.executor.execute(
      { action_type: "cancel_job", target: `blast_job/${running.job_id}`, params: {} },
      context(item.approval_id),
    );
    expect(w.hub.events).toHaveLength(1);
    expect((await w.audit.list({ action: "blast_job.cancel", limit: 100 })).map((e) => e.actor.oid)).toEqual([
      APPROVER.oid,
    ]);
    expect(await w.executions()).toHaveLength(1);
  });

  it("in shadow mode raises no event; refuses a job that has ended since verification", async () => {
    const shadow = await world({ modes: {} });
    const running = await shadow.jobIn("running");
    const item = await shadow.approve({ action_type: "cancel_job", target: `blast_job/${running.job_id}`, params: {} });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "shadow", executed: false, would: { job_id: running.job_id } },
    });
    expect(shadow.hub.events).toEqual([]);
    expect((await shadow.jobs.get(running.job_id))?.cancel_requested).toBe(false);

    const w = await world();
    const job = await w.jobIn("running");
    await w.jobs.update(job.job_id, (j) => ({ ...j, status: "completed" }));
    await expect(
      w.executor.execute({ action_type: "cancel_job", target: `blast_job/${job.job_id}`, params: {} }, context("k")),
    ).rejects.toMatchObject({ name: "ActionStateChangedError", observed: { status: "completed" } });
    expect(w.hub.events).toEqual([]);
  });
});

describe("rewarm_database and prepare_database_update", () => {
  it("rewarm_database approved: starts the warm-up orchestration once through the database service; a replay and a resumed crash start nothing more", async () => {
    let crash = false;
    const w = await world({ wrapDatabases: (s) => (crash ? { ...s, warmUp: crashAfter(s.warmUp) } : s) });
    const item = await w.approve({ action_type: "rewarm_database", target: "blast_database/actdemo", params: {} });
    const result = item.execution?.result as { operation_id: string };
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: {
        mode: "enforce",
        executed: true,
        database: "actdemo",
        operation_status_url: `/api/operations/${result.operation_id}`,
      },
    });
    expect(w.hub.starts).toEqual([
      { name: Orchestrations.warmDatabase, options: { instanceId: result.operation_id, input: { name: "actdemo" } } },
    ]);
    await w.executor.execute(
      { action_type: "rewarm_database", target: "blast_database/actdemo", params: {} },
      context(item.approval_id),
    );
    expect(w.hub.starts).toHaveLength(1);

    crash = true;
    const action = { action_type: "rewarm_database", target: "blast_database/actdemo", params: {} };
    await expect(w.executor.execute(action, context("key-crash"))).rejects.toThrow("host crashed");
    crash = false;
    await w.executor.execute(action, context("key-crash"));
    expect(w.hub.starts).toHaveLength(2);
    expect((await w.audit.list({ action: "database.warmup", limit: 100 })).map((e) => e.actor.oid)).toEqual([
      APPROVER.oid,
      APPROVER.oid,
    ]);
  });

  it("while another request holds the plan it is refused as in progress and nothing starts; once the dead holder's lease runs out the plan is resumed once", async () => {
    const clock = { now: new Date() };
    const w = await world({ now: () => clock.now });
    const action = { action_type: "rewarm_database", target: "blast_database/actdemo", params: {} };
    // A host that planned this execution and died before acting: its record, lease still running.
    const plan = { database: "actdemo", operation_id: "0123456789abcdef0123456789abcdef" };
    await w.outcomes.insert({
      idempotency_key: "key-dead",
      action_hash: actionOutcomeHash(action),
      action_type: action.action_type,
      target: action.target,
      state: "planned",
      mode: "enforce",
      plan,
      result: null,
      at: clock.now.toISOString(),
      lease_until: new Date(clock.now.getTime() + 60_000).toISOString(),
    });
    await expect(w.executor.execute(action, context("key-dead"))).rejects.toBeInstanceOf(ActionInProgressError);
    expect(w.hub.starts).toEqual([]);
    clock.now = new Date(clock.now.getTime() + 61_000);
    expect(await w.executor.execute(action, context("key-dead"))).toMatchObject({
      mode: "enforce",
      executed: true,
      operation_id: plan.operation_id,
    });
    expect(await w.executor.execute(action, context("key-dead"))).toMatchObject({ operation_id: plan.operation_id });
    expect(w.hub.starts).toEqual([
      { name: Orchestrations.warmDatabase, options: { instanceId: plan.operation_id, input: { name: "actdemo" } } },
    ]);
  });

  it("prepare_database_update approved: starts the prepare orchestration once; refused once the update is no longer available; shadow starts nothing", async () => {
    const w = await world();
    await w.states.patch("actdemo", { update_available: true, latest_release: "2026-11-01" });
    const item = await w.approve({
      action_type: "prepare_database_update",
      target: "blast_database/actdemo",
      params: {},
    });
    const result = item.execution?.result as { operation_id: string };
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "enforce", executed: true, database: "actdemo" },
    });
    expect(w.hub.starts).toEqual([
      {
        name: Orchestrations.prepareDatabase,
        options: { instanceId: result.operation_id, input: { name: "actdemo", partitions: 0 } },
      },
    ]);
    await w.executor.execute(
      { action_type: "prepare_database_update", target: "blast_database/actdemo", params: {} },
      context(item.approval_id),
    );
    expect(w.hub.starts).toHaveLength(1);

    await w.states.patch("actdemo", { update_available: false });
    await expect(
      w.executor.execute(
        { action_type: "prepare_database_update", target: "blast_database/actdemo", params: {} },
        context("k2"),
      ),
    ).rejects.toMatchObject({ name: "ActionStateChangedError", observed: { update_available: false } });
    expect(w.hub.starts).toHaveLength(1);

    const shadow = await world({ modes: {} });
    await shadow.states.patch("actdemo", { update_available: true });
    const shadowed = await shadow.approve({
      action_type: "prepare_database_update",
      target: "blast_database/actdemo",
      params: {},
    });
    expect(shadowed.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "shadow", executed: false, would: { database: "actdemo" } },
    });
    expect(shadow.hub.starts).toEqual([]);
  });
});

describe("rotate_api_token", () => {
  it("approved: rotates once through the token store, the predecessor valid for the grace; a replay and a resumed crash rotate no more", async () => {
    let crash = false;
    const w = await world({ wrapTokens: (s) => (crash ? { ...s, regenerate: crashAfter(s.regenerate) } : s) });
    const original = await w.tokens.state({ fresh: true });
    const item = await w.approve({ action_type: "rotate_api_token", target: "api_token/current", params: {} });
    const rotated = await w.tokens.state({ fresh: true });
    expect(rotated?.current.value).not.toBe(original?.current.value);
    expect(rotated?.previous?.value).toBe(original?.current.value);
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: {
        mode: "enforce",
        executed: true,
        last_four: rotated?.current.value.slice(-4),
        previous_valid_until: rotated?.previous?.valid_until,
      },
    });
    // The token itself is never in the result or the audit.
    expect(JSON.stringify(item.execution)).not.toContain(rotated?.current.value);
    expect(JSON.stringify(await w.executions())).not.toContain(rotated?.current.value);
    await w.executor.execute(
      { action_type: "rotate_api_token", target: "api_token/current", params: {} },
      context(item.approval_id),
    );
    expect((await w.tokens.state({ fresh: true }))?.current.value).toBe(rotated?.current.value);

    crash = true;
    const action = { action_type: "rotate_api_token", target: "api_token/current", params: {} };
    await expect(w.executor.execute(action, context("key-crash"))).rejects.toThrow("host crashed");
    crash = false;
    const afterCrash = await w.tokens.state({ fresh: true });
    await w.executor.execute(action, context("key-crash"));
    expect((await w.tokens.state({ fresh: true }))?.current.value).toBe(afterCrash?.current.value);
    expect(await w.audit.list({ action: "api_token.regenerate", limit: 100 })).toHaveLength(2);
  });

  it("refuses when no token is configured at execution, creating none", async () => {
    const w = await world({ tokenConfigured: false });
    await expect(
      w.executor.execute({ action_type: "rotate_api_token", target: "api_token/current", params: {} }, context("k")),
    ).rejects.toMatchObject({ name: "ActionStateChangedError", observed: { configured: false } });
    expect(await w.tokens.state({ fresh: true })).toBeUndefined();
    expect(await w.executions()).toMatchObject([{ outcome: "denied", details: { action_type: "rotate_api_token" } }]);
  });

  it("in shadow mode leaves the token as it is", async () => {
    const w = await world({ modes: {} });
    const original = await w.tokens.state({ fresh: true });
    const item = await w.approve({ action_type: "rotate_api_token", target: "api_token/current", params: {} });
    expect(item.execution).toMatchObject({
      status: "succeeded",
      result: { mode: "shadow", executed: false, would: { replaces_created_at: original?.current.created_at } },
    });
    expect((await w.tokens.state({ fresh: true }))?.current.value).toBe(original?.current.value);
  });
});

describe("kill_switch", () => {
  it("runs in enforce mode by default and, replayed, sets nothing again", async () => {
    const w = await world({ modes: {} });
    const result = await w.executor.execute(
      { action_type: "kill_switch", target: "control_plane", params: { on: true } },
      context("ks-1"),
    );
    expect(result).toMatchObject({ mode: "enforce", executed: true, kill_switch: true });
    expect(await w.killSwitch.isOn()).toBe(true);
    await w.killSwitch.set(false, "oid-other", new Date());
    await w.executor.execute(
      { action_type: "kill_switch", target: "control_plane", params: { on: true } },
      context("ks-1"),
    );
    expect(await w.killSwitch.isOn()).toBe(false);
  });
});

describe("run_runbook real runs through the executors", () => {
  it("an Owner's real run executes under the request's key once (its replay answers the recorded result); a cluster action without its settings answers not_supported naming them", async () => {
    const w = await world();
    const failed = await w.jobIn("failed");
    const owner = callerWith("Owner", "oid-olga");
    const reply = await w.coordinator.handleTurn(
      owner,
      { text: `run_runbook name=retry_failed_job params={"job_id":"${failed.job_id}"} dry_run=false` },
      "req-run-1",
    );
    expect(reply.tool_results[0]).toMatchObject({
      status: "ok",
      data: { dry_run: false, result: { mode: "enforce", executed: true, retry_of: failed.job_id } },
    });
    const again = await w.coordinator.handleTurn(
      owner,
      { text: `run_runbook name=retry_failed_job params={"job_id":"${failed.job_id}"} dry_run=false` },
      "req-run-1",
    );
    const resultOf = (r: typeof reply) =>
      (r.tool_results[0] as { data?: { result?: unknown } } | undefined)?.data?.result;
    expect(resultOf(again)).toEqual(resultOf(reply));
    expect((await w.jobs.list({ page: 1, pageSize: 50 })).total).toBe(2);
    expect(await w.executions()).toMatchObject([
      { outcome: "succeeded", details: { idempotency_key: "runbook/req-run-1" } },
    ]);

    const redeploy = await w.coordinator.handleTurn(
      owner,
      { text: "run_runbook name=redeploy_job_api dry_run=false" },
      "req-run-2",
    );
    expect(redeploy.tool_results[0]).toMatchObject({
      status: "error",
      error: { type: "not_supported", message: expect.stringContaining("SVC_KUBECONFIG") },
    });
  });
});
