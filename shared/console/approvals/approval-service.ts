import type { ActionExecutor } from "../../ops/actions/action-executor.js";
import type { AuditActor, AuditLog } from "../../ops/audit.js";
import type { KillSwitch } from "../../ops/kill-switch.js";
import type { Severity } from "../../ops/rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "../../ops/verifier/verifier.js";
import type { Notifier } from "../notify/outbox-notifier.js";
import { ToolError } from "../tools/tool.js";
import { type ApprovalDecision, type ApprovalItem, type ApprovalStore, actionHash } from "./approval-store.js";

/** The invariant named in the audit reason of a refused self-approval (spec §5 item 3). */
export const NO_SELF_APPROVAL = "no_self_approval";

export interface ApprovalServiceDependencies {
  store: ApprovalStore;
  audit: AuditLog;
  notifier: Notifier;
  verify(action: ProposedAction): Promise<VerifierReport>;
  executor: ActionExecutor;
  killSwitch: KillSwitch;
  /** Object ids of the approvers A1 requests go to. */
  approvers: readonly string[];
  ttlSeconds: number;
  /** Seconds before the original expiry at which reminders go out (each at most once). */
  reminderOffsetsSeconds: readonly number[];
}

/** What a decision returns: the item as recorded, and the execution when it ran now or before. */
export interface DecisionResult {
  outcome: "recorded" | "existing" | "timeout";
  item: ApprovalItem;
}

const system: AuditActor = { oid: "system", name: "operations core" };

/**
 * Human approvals (A1) over the durable queue: filing, the decision with its invariants, the one
 * execution of an approved action through the verifier, expiry, and reminders. The
 * `approvalRequest` orchestration and the `approve_hil` tool both act through this service.
 */
export function createApprovalService(deps: ApprovalServiceDependencies) {
  const { store, audit } = deps;

  async function deliver(item: ApprovalItem, kind: "request" | "reminder", step: string, requestId: string): Promise<number> {
    let sent = 0;
    for (const approver of deps.approvers) {
      if (approver === item.requester.oid) continue;
      const receipt = await deps.notifier.send({
        category: "A1",
        template_key: `approval.${kind}`,
        recipient: approver,
        title: kind === "request" ? "Approval requested" : "Approval reminder",
        // Only the opaque id: the decision is made through the authenticated API, never by a link.
        body_markdown: `Approval ${item.approval_id} is waiting for a decision before ${item.expires_at}.`,
        correlation_id: item.approval_id,
        idempotency_key: `${item.approval_id}/${step}/${approver}`,
      });
      if (receipt.confirmed) sent++;
    }
    await audit.record({ actor: system, action: `console.approval_${kind}`, target: item.approval_id, outcome: "succeeded", request_id: requestId, details: { step, delivered: sent } });
    return sent;
  }

  return {
    /** Parks the request durably first, then delivers it unless the kill switch holds A1 delivery. */
    async request(input: { action: ProposedAction; requester: AuditActor; reason: string; severity: Severity; idempotencyKey: string; requestId: string; now: Date }): Promise<ApprovalItem> {
      const item = await store.file({ idempotency_key: input.idempotencyKey, action: input.action, requester: input.requester, reason: input.reason, severity: input.severity, ttlSeconds: deps.ttlSeconds }, input.now);
      await audit.record({
        actor: input.requester,
        action: "console.enqueue_hil",
        target: item.approval_id,
        outcome: "succeeded",
        request_id: input.requestId,
        details: { reason: input.reason, action_type: input.action.action_type, action_target: input.action.target, action_hash: item.action_hash, side_effect_class: "approve" },
      });
      return item;
    },

    /** Sends the request to the approvers once (claimed), or holds it while the kill switch is on. */
    async deliverRequest(approvalId: string, requestId: string, now: Date): Promise<"sent" | "held" | "skipped"> {
      const item = await store.get(approvalId);
      if (item?.state !== "pending") return "skipped";
      if (await deps.killSwitch.isOn()) {
        await audit.record({ actor: system, action: "console.approval_requeued", target: approvalId, outcome: "succeeded", request_id: requestId, details: { reason: "kill_switch_on" } });
        return "held";
      }
      if (!(await store.claim(approvalId, "request", now))) return "skipped";
      await deliver(item, "request", "request", requestId);
      return "sent";
    },

    /** When reminder `index` is due: its time, `offset` seconds before the original expiry. */
    reminderTimes(item: ApprovalItem): Date[] {
      const expiry = Date.parse(item.expires_at);
      const created = Date.parse(item.created_at);
      return deps.reminderOffsetsSeconds.map((s) => new Date(expiry - s * 1000)).filter((at) => at.getTime() > created);
    },

    /** Sends reminder `index` once across hosts; success and failure are audited; the TTL never moves. */
    async remind(approvalId: string, index: number, requestId: string, now: Date): Promise<"sent" | "claimed_elsewhere" | "not_pending" | "failed"> {
      const item = await store.get(approvalId);
      if (item?.state !== "pending" || index >= deps.reminderOffsetsSeconds.length) return "not_pending";
      if (!(await store.claim(approvalId, `reminder-${index}`, now))) return "claimed_elsewhere";
      try {
        await deliver(item, "reminder", `reminder-${index}`, requestId);
        return "sent";
      } catch (error) {
        await audit.record({ actor: system, action: "console.approval_reminder", target: approvalId, outcome: "failed", request_id: requestId, details: { step: `reminder-${index}`, error: error instanceof Error ? error.message : String(error) } });
        return "failed";
      }
    },

    /** Times out a pending item whose TTL passed; the one call that does it writes the one audit entry. */
    async expire(approvalId: string, requestId: string, now: Date): Promise<ApprovalItem | undefined> {
      const result = await store.expire(approvalId, now);
      if (result?.newlyTimedOut) await audit.record({ actor: system, action: "console.approval_timeout", target: approvalId, outcome: "succeeded", request_id: requestId, details: { expires_at: result.item.expires_at } });
      return result?.item;
    },

    /**
     * Decides one item: refuses self-approval (even for an Owner), re-validates the action hash,
     * re-checks the verifier before an approval applies, and answers a late decision with the
     * existing timeout. An approval executes the action exactly once.
     */
    async decide(input: { approvalId: string; actor: AuditActor; decision: ApprovalDecision; justification: string; actionHash?: string; requestId: string; now: Date }): Promise<DecisionResult> {
      const item = await store.get(input.approvalId);
      if (!item) throw new ToolError("not_found", `no approval ${input.approvalId}`);
      const base = { actor: input.actor, action: "console.approve_hil", target: item.approval_id, request_id: input.requestId };
      if (item.state === "pending" && input.actor.oid === item.requester.oid) {
        await audit.record({ ...base, outcome: "denied", details: { reason: NO_SELF_APPROVAL, invariant: NO_SELF_APPROVAL, decision: input.decision, side_effect_class: "approve" } });
        throw new ToolError("self_approval", `refused by the ${NO_SELF_APPROVAL} invariant: the requester of ${item.approval_id} cannot decide it`);
      }
      // The stored action must still be the one the hash bound, and a presented hash must match it.
      const expectedHash = actionHash(item.action);
      if (expectedHash !== item.action_hash || (input.actionHash !== undefined && input.actionHash !== item.action_hash)) {
        await audit.record({ ...base, outcome: "denied", details: { reason: "action_hash_mismatch", side_effect_class: "approve" } });
        throw new ToolError("conflict", `the action_hash does not match approval ${item.approval_id}`);
      }
      if (input.decision === "approve" && item.state === "pending" && input.now.getTime() < Date.parse(item.expires_at)) {
        const report = await deps.verify(item.action);
        if (report.verdict !== "eligible") {
          await audit.record({ ...base, outcome: "denied", details: { reason: "verifier_recheck", verdict: report.verdict, missing_evidence: report.missing_evidence, side_effect_class: "approve" } });
          throw new ToolError(report.verdict === "abstain" ? "verifier_abstained" : "verifier_denied", `the verifier ${report.verdict === "abstain" ? "abstains" : "denies"} ${item.action.action_type} on ${item.action.target} now; the approval was not applied`, {
            missing_evidence: report.missing_evidence,
            ...(report.reason ? { reason: report.reason } : {}),
          });
        }
      }
      const outcome = await store.decide(input.approvalId, { actor: input.actor, decision: input.decision, justification: input.justification, action_hash: item.action_hash }, input.now);
      if (!outcome) throw new ToolError("not_found", `no approval ${input.approvalId}`);
      switch (outcome.kind) {
        case "timeout":
          if (outcome.newlyTimedOut) await audit.record({ actor: system, action: "console.approval_timeout", target: item.approval_id, outcome: "succeeded", request_id: input.requestId, details: { expires_at: item.expires_at } });
          return { outcome: "timeout", item: outcome.item };
        case "conflict":
          await audit.record({ ...base, outcome: "denied", details: { reason: "decision_conflict", recorded: outcome.item.decision, side_effect_class: "approve" } });
          throw new ToolError("conflict", `approval ${item.approval_id} already has a ${outcome.item.decision?.decision} decision by another actor or of another kind`);
        case "self_approval":
          await audit.record({ ...base, outcome: "denied", details: { reason: NO_SELF_APPROVAL, invariant: NO_SELF_APPROVAL, side_effect_class: "approve" } });
          throw new ToolError("self_approval", `refused by the ${NO_SELF_APPROVAL} invariant`);
        case "hash_mismatch":
          throw new ToolError("conflict", `the action_hash does not match approval ${item.approval_id}`);
        case "existing":
          return { outcome: "existing", item: outcome.item };
        case "recorded": {
          await audit.record({ ...base, outcome: "succeeded", details: { decision: input.decision, justification: input.justification, action_hash: item.action_hash, side_effect_class: "approve" } });
          const executed = input.decision === "approve" ? await this.executeApproved(item.approval_id, input.requestId, input.now) : outcome.item;
          return { outcome: "recorded", item: executed ?? outcome.item };
        }
      }
    },

    /**
     * Executes an approved item's action once: a replay (a restarted host) finds the execution
     * recorded and does nothing; the executor is idempotent by the approval id for a crash between
     * executing and recording. The verifier is asked again right before execution.
     */
    async executeApproved(approvalId: string, requestId: string, now: Date): Promise<ApprovalItem | undefined> {
      const item = await store.get(approvalId);
      if (item?.state !== "approved" || item.execution) return item;
      const actor = item.decision?.actor ?? system;
      let execution: NonNullable<ApprovalItem["execution"]>;
      const report = await deps.verify(item.action);
      if ((await deps.killSwitch.isOn()) && item.action.action_type !== "kill_switch") execution = { status: "refused", at: now.toISOString(), result: { reason: "kill_switch_on" } };
      else if (report.verdict !== "eligible") execution = { status: "refused", at: now.toISOString(), result: { reason: "verifier", verdict: report.verdict, missing_evidence: report.missing_evidence } };
      else {
        try {
          execution = { status: "succeeded", at: now.toISOString(), result: await deps.executor.execute(item.action, { idempotencyKey: item.approval_id, actor, requestId }) };
        } catch (error) {
          execution = { status: "failed", at: now.toISOString(), result: { error: error instanceof Error ? error.message : String(error) } };
        }
      }
      if (await store.recordExecution(approvalId, execution)) {
        await audit.record({ actor, action: "console.action_executed", target: approvalId, outcome: execution.status === "succeeded" ? "succeeded" : execution.status === "refused" ? "denied" : "failed", request_id: requestId, details: { action_type: item.action.action_type, action_target: item.action.target, side_effect_class: "execute", result: execution.result } });
      }
      return store.get(approvalId);
    },
  };
}

export type ApprovalService = ReturnType<typeof createApprovalService>;
