import type { Caller, Role } from "../../shared/auth/roles.js";
import { createApprovalService } from "../../shared/console/approvals/approval-service.js";
import { createApprovalStore } from "../../shared/console/approvals/approval-store.js";
import { createKillSwitchAnnouncer } from "../../shared/console/approvals/kill-switch-announcer.js";
import type { LoadPolicy } from "../../shared/console/approvals/load-policy.js";
import { loadBreakGlassConfig } from "../../shared/console/break-glass/break-glass.js";
import { type Coordinator, createCoordinator } from "../../shared/console/coordinator/coordinator.js";
import type { Narrator } from "../../shared/console/coordinator/narrator.js";
import type { UsageLedger } from "../../shared/console/usage/usage-ledger.js";
import { createOutboxNotifier } from "../../shared/notify/outbox-notifier.js";
import type { ConsoleProviders } from "../../shared/console/providers/providers.js";
import { createRecurrentQueryWatch } from "../../shared/console/recurrent-query.js";
import { createConsoleToolRegistry } from "../../shared/console/tools/index.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import { createUsageLedger } from "../../shared/console/usage/usage-ledger.js";
import { createLogger } from "../../shared/logging/logger.js";
import type { ActionExecutor } from "../../shared/ops/actions/action-executor.js";
import { loadActionTypes } from "../../shared/ops/actions/action-types.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { createEventLog } from "../../shared/ops/events.js";
import type { EvidenceStore } from "../../shared/ops/evidence-store.js";
import { createKillSwitch } from "../../shared/ops/kill-switch.js";
import { loadRuleCatalog } from "../../shared/ops/rules/rule-catalog.js";
import { type ControlPlaneStateReader, type ProposedAction, verifyAction } from "../../shared/ops/verifier/verifier.js";
import type { TableClientFactory } from "../../shared/storage/table-source.js";

export const actions = loadActionTypes();
export const rules = loadRuleCatalog(actions);

/** A caller with exactly one role (or none). */
export function callerWith(role: Role | undefined, oid = `oid-${role ?? "none"}`): Caller {
  return { oid, name: `${role ?? "No-role"} user`, tenant_id: "tenant", roles: role ? [role] : [] };
}

/** Sends `text` as one turn of a caller with `role` and returns the first tool result (fails with the reply's text when none). */
export async function firstToolResult(
  coordinator: Pick<Coordinator, "handleTurn">,
  text: string,
  role: Role = "Reader",
): Promise<ToolResult> {
  const reply = await coordinator.handleTurn(callerWith(role), { text });
  const result = reply.tool_results[0];
  if (!result) throw new Error(reply.text);
  return result;
}

/** Mutable control-plane state the verifier reads in tests. */
export interface TestState {
  jobs: Map<string, string>;
  databases: Map<string, { update_available: boolean }>;
  clusterReachable: boolean | undefined;
}

/**
 * The console over real Azurite tables: the real audit, events, approvals, outbox and usage
 * ledger; a state reader over `state` (the control plane's stores are tested elsewhere); an
 * executor that records what it executed, idempotent by key as the contract requires.
 */
export function consoleHarness(
  tables: TableClientFactory,
  options: {
    providers?: ConsoleProviders;
    evidence?: EvidenceStore;
    owners?: string[];
    approvers?: string[];
    ttlSeconds?: number;
    reminderOffsetsSeconds?: number[];
    loadPolicy?: LoadPolicy;
    /** Bounds on pending approvals (the service's defaults when unset). */
    pendingLimits?: { perRequester?: number; perActionTarget?: number };
    now?: () => Date;
    recurrentQuery?: { threshold: number; windowSeconds: number };
    /** The real control plane instead of `state` (the action executors' tests): its reader and executor. */
    controlPlane?: { reader: ControlPlaneStateReader; executor: ActionExecutor };
    /** A narrator built over the harness's usage ledger (rules 2–7). */
    narrator?: (usage: UsageLedger) => Narrator;
  } = {},
) {
  const now = options.now ?? (() => new Date());
  const state: TestState = {
    jobs: new Map([
      ["j-failed", "failed"],
      ["j-running", "running"],
    ]),
    databases: new Map([["nt", { update_available: true }]]),
    clusterReachable: undefined,
  };
  const audit = createAuditLog(tables, { now });
  const events = createEventLog(tables, { now });
  const notifier = createOutboxNotifier(tables, { now });
  const approvalStore = createApprovalStore(tables);
  const approvers = options.approvers ?? ["oid-Approver", "oid-Owner"];
  const killSwitch = createKillSwitch(tables, {
    onChange: createKillSwitchAnnouncer({ store: approvalStore, notifier, audit, recipients: approvers }),
  });
  const reader: ControlPlaneStateReader = options.controlPlane?.reader ?? {
    jobStatus: async (id) => state.jobs.get(id) ?? null,
    database: async (name) => state.databases.get(name) ?? null,
    apiTokenConfigured: async () => true,
    clusterReachable: async () => state.clusterReachable,
    nodePoolBounds: async () => ({ min: 1, max: 5 }),
    killSwitchOn: () => killSwitch.isOn(),
  };
  const verify = (action: ProposedAction) => verifyAction(action, actions, reader, now);
  const executed: { action: ProposedAction; idempotencyKey: string }[] = [];
  const executor: ActionExecutor = options.controlPlane?.executor ?? {
    async execute(action, context) {
      if (!executed.some((e) => e.idempotencyKey === context.idempotencyKey))
        executed.push({ action, idempotencyKey: context.idempotencyKey });
      if (action.action_type === "kill_switch")
        await killSwitch.set(action.params.on === true, context.actor.oid, now());
      return { executed: action.action_type };
    },
  };
  const approvals = createApprovalService({
    store: approvalStore,
    audit,
    notifier,
    verify,
    executor,
    killSwitch,
    actionTypes: actions,
    approvers,
    ttlSeconds: options.ttlSeconds ?? 3600,
    reminderOffsetsSeconds: options.reminderOffsetsSeconds ?? [1800, 300],
    ...(options.loadPolicy ? { loadPolicy: options.loadPolicy } : {}),
    ...(options.pendingLimits ? { pendingLimits: options.pendingLimits } : {}),
  });
  const usage = createUsageLedger(tables, { now });
  const registry = createConsoleToolRegistry({
    events,
    audit,
    rules,
    actions,
    verify,
    approvals,
    approvalStore,
    usage,
    executor,
    providers: options.providers ?? {},
    ...(options.evidence ? { evidence: options.evidence } : {}),
    notifier,
    breakGlass: loadBreakGlassConfig({ owners: options.owners ?? ["oid-owner-1", "oid-owner-2"] }),
    incidentWindowMs: 30 * 60_000,
  });
  const recurrent = options.recurrentQuery
    ? createRecurrentQueryWatch({ tables, events, logger: createLogger({ level: "error" }), ...options.recurrentQuery })
    : undefined;
  const coordinator = createCoordinator({
    registry,
    audit,
    approvals,
    verify,
    now,
    recurrent,
    ...(options.evidence ? { evidence: options.evidence } : {}),
    ...(options.narrator
      ? { narrator: options.narrator(usage), actionTypes: actions.action_types.map((a) => a.id) }
      : {}),
  });
  return {
    state,
    audit,
    events,
    killSwitch,
    reader,
    verify,
    executed,
    executor,
    notifier,
    approvalStore,
    approvals,
    usage,
    registry,
    coordinator,
  };
}

/**
 * Holds coordinator turns until `release()`: `wrap` gives a coordinator whose turns wait, `started`
 * resolves once one is waiting. For tests of what happens while a turn runs (the channel routes
 * answer before it ends).
 */
export function turnGate() {
  let release = () => {};
  let entered = () => {};
  const started = new Promise<void>((resolve) => {
    entered = resolve;
  });
  const until = new Promise<void>((resolve) => {
    release = resolve;
  });
  const wrap = <C extends { handleTurn: (...args: never[]) => Promise<unknown> }>(coordinator: C) =>
    ({
      handleTurn: async (...args: Parameters<C["handleTurn"]>) => {
        entered();
        await until;
        return coordinator.handleTurn(...args);
      },
    }) as Pick<C, "handleTurn">;
  return { wrap, started, release };
}
