import { createHash } from "node:crypto";
import {
  authenticationFreshness,
  DEFAULT_REAUTH_MAX_AGE_SECONDS,
  reauthenticationText,
} from "../../auth/fresh-authentication.js";
import { sameObjectId } from "../../auth/object-id.js";
import type { Role } from "../../auth/roles.js";
import type { ActionTypeCatalog } from "../../ops/actions/action-types.js";
import { type ActionExecutor, ActionInProgressError } from "../../ops/actions/action-executor.js";
import type { AuditActor, AuditLog } from "../../ops/audit.js";
import type { KillSwitch } from "../../ops/kill-switch.js";
import { scanSecrets } from "../../ops/secret-scanner.js";
import type { Severity } from "../../ops/rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "../../ops/verifier/verifier.js";
import type { Notifier } from "../../notify/types.js";
import { ToolError } from "../tools/tool.js";
import { type DeliveryPolicy, type LoadPolicy, planDelivery } from "./load-policy.js";
import {
  type ApprovalDecision,
  type ApprovalItem,
  type ApprovalStore,
  actionHash,
  approvalIdOf,
} from "./approval-store.js";
import { createApprovalAuthority, DECIDER_ROLE_BELOW_FLOOR, NO_SELF_APPROVAL } from "./authority.js";

export { DECIDER_ROLE_BELOW_FLOOR, NO_SELF_APPROVAL } from "./authority.js";

export interface ApprovalServiceDependencies {
  store: ApprovalStore;
  audit: AuditLog;
  notifier: Notifier;
  verify(action: ProposedAction): Promise<VerifierReport>;
  executor: ActionExecutor;
  killSwitch: KillSwitch;
  /** The action-type catalog: each type's floor and whether it always needs an approval (`authority.ts`). */
  actionTypes: ActionTypeCatalog;
  /** Object ids of the approvers A1 requests go to. */
  approvers: readonly string[];
  ttlSeconds: number;
  /**
   * A decider authenticated by a bearer token must have signed in interactively at most this long
   * ago (`auth_time`); default {@link DEFAULT_REAUTH_MAX_AGE_SECONDS}.
   */
  reauthMaxAgeSeconds?: number;
  /** Seconds before the original expiry at which reminders go out (each at most once). */
  reminderOffsetsSeconds: readonly number[];
  /** The load policy the orchestration planned with: it names each group's members. */
  loadPolicy?: LoadPolicy;
  /** Bounds on pending approvals; {@link DEFAULT_PENDING_LIMITS} when unset. */
  pendingLimits?: Partial<PendingLimits>;
}

/** The group a deferred or grouped request goes out with: all non-critical requests planned for `send_at`. */
export interface DeliveryGroup {
  policy: DeliveryPolicy;
  send_at: string;
}

/** A group's digest id: opaque, and the same on every host and replay for the same send time. */
export function digestIdOf(sendAt: string): string {
  return `dig_${createHash("sha256").update(`approval-digest/${sendAt}`).digest("hex").slice(0, 24)}`;
}

/** How many approvals may wait at once: per requester, and per action type and target. */
export interface PendingLimits {
  perRequester: number;
  perActionTarget: number;
}

/** Defaults: enough for an operator's working set, too few to flood the approvers (issue 21 item 7). */
export const DEFAULT_PENDING_LIMITS: PendingLimits = { perRequester: 10, perActionTarget: 3 };

/** A filing refused because too many approvals are pending; nothing was filed or sent. */
export class ApprovalLimitError extends ToolError {
  constructor(
    readonly limit: "per_requester" | "per_action_target",
    readonly max: number,
    message: string,
  ) {
    super("conflict", `Not filed: ${message}.`, { reason: "pending_approval_limit", limit, max });
    this.name = "ApprovalLimitError";
  }
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
  const authority = createApprovalAuthority(deps.actionTypes);

  async function deliver(
    item: ApprovalItem,
    kind: "request" | "reminder",
    step: string,
    requestId: string,
  ): Promise<number> {
    let sent = 0;
    for (const approver of deps.approvers) {
      if (sameObjectId(approver, item.requester.oid)) continue;
      const receipt = await deps.notifier.send({
        category: "A1",
        template_key: `approval.${kind}`,
        recipient: approver,
        title: kind === "request" ? "Approval requested" : "Approval reminder",
        // Only the opaque id: the decision is made through the authenticated API, never by a link.
        body_markdown: `Approval ${item.approval_id} is waiting for a decision before ${item.expires_at}.`,
        // The action_hash lets a Teams SSO decision re-validate the exact action (spec §5 item 5).
        params: { approval_id: item.approval_id, expires_at: item.expires_at, action_hash: item.action_hash },
        correlation_id: item.approval_id,
        idempotency_key: `${item.approval_id}/${step}/${approver}`,
      });
      if (receipt.confirmed) sent++;
    }
    await audit.record({
      actor: system,
      action: `console.approval_${kind}`,
      target: item.approval_id,
      outcome: "succeeded",
      request_id: requestId,
      details: { step, delivered: sent },
    });
    return sent;
  }

  /**
   * While the kill switch is on, A1 delivery is held; the first hold of an item in one activation
   * (claimed by the activation's time) is audited as a requeue.
   */
  async function held(item: ApprovalItem, requestId: string, now: Date): Promise<boolean> {
    const status = await deps.killSwitch.status();
    if (!status.on) return false;
    if (await store.claim(item.approval_id, `requeued-${status.set_at ?? ""}`, now)) {
      await audit.record({
        actor: system,
        action: "console.approval_requeued",
        target: item.approval_id,
        outcome: "succeeded",
        request_id: requestId,
        details: { reason: "kill_switch_on" },
      });
    }
    return true;
  }

  /** Whether `item` belongs to the group sent at `sendAt` (planned with the same policy). */
  const inGroup = (item: ApprovalItem, sendAt: string) => {
    const planned = planDelivery(
      item.severity,
      new Date(item.created_at),
      deps.loadPolicy ?? { groupIntervalSeconds: 0 },
    );
    return planned.policy !== "send_now" && planned.send_at === sendAt;
  };

  /**
   * Sends a group's one anchor digest to each approver, listing every member that approver may
   * decide (a requester is never asked about its own item). Idempotent by digest id and approver,
   * so a host that finds the digest claimed can send it again to heal a crash without a duplicate.
   */
  async function sendDigest(
    digestId: string,
    members: readonly ApprovalItem[],
  ): Promise<{ delivered: number; mode: "list" | "summary" }> {
    const cap = deps.loadPolicy?.fatigue?.maxListedMembers ?? Number.POSITIVE_INFINITY;
    let delivered = 0;
    let mode: "list" | "summary" = "list";
    for (const approver of deps.approvers) {
      const mine = members.filter((m) => !sameObjectId(m.requester.oid, approver));
      if (mine.length === 0) continue;
      const listed = mine.slice(0, cap);
      if (listed.length < mine.length) mode = "summary";
      const lines = listed.map((m) => `- ${m.approval_id} (decide before ${m.expires_at})`);
      if (listed.length < mine.length)
        lines.push(`- and ${mine.length - listed.length} more: list_hil shows every one`);
      const receipt = await deps.notifier.send({
        category: "A1",
        template_key: "approval.digest",
        recipient: approver,
        title: `${mine.length} approval${mine.length === 1 ? "" : "s"} requested`,
        // Only opaque ids: each item is decided on its own through the authenticated API.
        body_markdown: `${mine.length} approval${mine.length === 1 ? " is" : "s are"} waiting for a decision:\n${lines.join("\n")}`,
        params: { count: mine.length, items: lines.join("\n") },
        correlation_id: digestId,
        idempotency_key: `${digestId}/${approver}`,
      });
      if (receipt.confirmed) delivered++;
    }
    return { delivered, mode };
  }

  /**
   * Delivers a deferred or grouped request with its group: the first member to claim the group's
   * digest sends it, listing every pending member; the others find themselves listed. A member the
   * digest missed (filed at the boundary after it went out) is sent on its own.
   */
  async function deliverInGroup(
    item: ApprovalItem,
    group: DeliveryGroup,
    requestId: string,
    now: Date,
  ): Promise<"sent" | "in_digest" | "skipped"> {
    const digestId = digestIdOf(group.send_at);
    const pending = (await store.listPending()).filter((p) => now.getTime() < Date.parse(p.expires_at));
    const members = pending.filter((p) => p.approval_id === item.approval_id || inGroup(p, group.send_at));
    if (!members.some((m) => m.approval_id === item.approval_id)) members.push(item);
    const claim = await store.claimDigest(
      digestId,
      members.map((m) => m.approval_id),
      now,
    );
    if (claim.claimed) {
      const { delivered, mode } = await sendDigest(digestId, members);
      await audit.record({
        actor: system,
        action: "console.approval_digest",
        target: digestId,
        outcome: "succeeded",
        request_id: requestId,
        details: { policy: group.policy, send_at: group.send_at, members: claim.members, mode, delivered },
      });
      return "sent";
    }
    if (claim.members.includes(item.approval_id)) {
      await sendDigest(
        digestId,
        pending.filter((p) => claim.members.includes(p.approval_id)),
      );
      return "in_digest";
    }
    return deliverRequestOnce(item, requestId, now);
  }

  /**
   * Sends the request itself once. A delivery that failed part-way (its activity retried) is sent
   * again: the notifier is idempotent per approver, and only a finished delivery marks it sent.
   */
  async function deliverRequestOnce(item: ApprovalItem, requestId: string, now: Date): Promise<"sent" | "skipped"> {
    if (
      !(await store.claim(item.approval_id, "request", now)) &&
      (await store.claimed(item.approval_id, "request-sent"))
    )
      return "skipped";
    await deliver(item, "request", "request", requestId);
    await store.claim(item.approval_id, "request-sent", now);
    return "sent";
  }

  return {
    /** Who may authorize what: the one rule, shared with the coordinator and the channels. */
    authority,

    /** Parks the request durably first, then delivers it unless the kill switch holds A1 delivery. */
    async request(input: {
      action: ProposedAction;
      requester: AuditActor;
      reason: string;
      severity: Severity;
      idempotencyKey: string;
      requestId: string;
      now: Date;
    }): Promise<ApprovalItem> {
      // A retry of the same filing (same idempotency key) is the same item, whatever the bounds say now.
      const replay = await store.get(approvalIdOf(input.idempotencyKey));
      if (!replay) {
        const pending = (await store.listPending()).filter((p) => input.now.getTime() < Date.parse(p.expires_at));
        // An identical request already waiting: that item is the answer, nothing new is filed or sent.
        const hash = actionHash(input.action);
        const identical = pending.find((p) => p.action_hash === hash);
        if (identical) return identical;
        const limits = { ...DEFAULT_PENDING_LIMITS, ...deps.pendingLimits };
        const sameTarget = pending.filter(
          (p) => p.action.action_type === input.action.action_type && p.action.target === input.action.target,
        );
        if (sameTarget.length >= limits.perActionTarget)
          throw new ApprovalLimitError(
            "per_action_target",
            limits.perActionTarget,
            `${sameTarget.length} approvals of ${input.action.action_type} on ${input.action.target} are already pending (at most ${limits.perActionTarget}); decide or let them expire first`,
          );
        const mine = pending.filter((p) => sameObjectId(p.requester.oid, input.requester.oid));
        if (mine.length >= limits.perRequester)
          throw new ApprovalLimitError(
            "per_requester",
            limits.perRequester,
            `you already have ${mine.length} approvals pending (at most ${limits.perRequester}); wait for decisions or expiry before filing more`,
          );
      }
      const item = await store.file(
        {
          idempotency_key: input.idempotencyKey,
          action: input.action,
          requester: input.requester,
          reason: input.reason,
          severity: input.severity,
          ttlSeconds: deps.ttlSeconds,
        },
        input.now,
      );
      await audit.record({
        actor: input.requester,
        action: "console.enqueue_hil",
        target: item.approval_id,
        outcome: "succeeded",
        request_id: input.requestId,
        details: {
          reason: input.reason,
          action_type: input.action.action_type,
          action_target: input.action.target,
          action_hash: item.action_hash,
          side_effect_class: "approve",
        },
      });
      return item;
    },

    /**
     * Sends the request to the approvers once (claimed), alone or, for a deferred or grouped
     * request, in its group's one digest; holds it while the kill switch is on.
     */
    async deliverRequest(
      approvalId: string,
      requestId: string,
      now: Date,
      group?: DeliveryGroup,
    ): Promise<"sent" | "in_digest" | "held" | "skipped"> {
      const item = await store.get(approvalId);
      if (item?.state !== "pending") return "skipped";
      if (await held(item, requestId, now)) return "held";
      if (group) return deliverInGroup(item, group, requestId, now);
      return deliverRequestOnce(item, requestId, now);
    },

    /** When reminder `index` is due: its time, `offset` seconds before the original expiry. */
    reminderTimes(item: ApprovalItem): Date[] {
      const expiry = Date.parse(item.expires_at);
      const created = Date.parse(item.created_at);
      return deps.reminderOffsetsSeconds.map((s) => new Date(expiry - s * 1000)).filter((at) => at.getTime() > created);
    },

    /** Sends reminder `index` once across hosts; success and failure are audited; the TTL never moves. */
    async remind(
      approvalId: string,
      index: number,
      requestId: string,
      now: Date,
    ): Promise<"sent" | "claimed_elsewhere" | "not_pending" | "failed" | "held"> {
      const item = await store.get(approvalId);
      if (item?.state !== "pending" || index >= deps.reminderOffsetsSeconds.length) return "not_pending";
      // A reminder is A1 delivery too: held (not claimed, so it can go out later) while the kill switch is on.
      if (await held(item, requestId, now)) return "held";
      if (!(await store.claim(approvalId, `reminder-${index}`, now))) return "claimed_elsewhere";
      try {
        await deliver(item, "reminder", `reminder-${index}`, requestId);
        return "sent";
      } catch (error) {
        await audit.record({
          actor: system,
          action: "console.approval_reminder",
          target: approvalId,
          outcome: "failed",
          request_id: requestId,
          details: { step: `reminder-${index}`, error: error instanceof Error ? error.message : String(error) },
        });
        return "failed";
      }
    },

    /** Times out a pending item whose TTL passed; the one call that does it writes the one audit entry. */
    async expire(approvalId: string, requestId: string, now: Date): Promise<ApprovalItem | undefined> {
      const result = await store.expire(approvalId, now);
      if (result?.newlyTimedOut)
        await audit.record({
          actor: system,
          action: "console.approval_timeout",
          target: approvalId,
          outcome: "succeeded",
          request_id: requestId,
          details: { expires_at: result.item.expires_at },
        });
      return result?.item;
    },

    /**
     * Decides one item: refuses self-approval (even for an Owner), re-validates the action hash,
     * re-checks the verifier before an approval applies, and answers a late decision with the
     * existing timeout. An approval executes the action exactly once.
     */
    async decide(input: {
      approvalId: string;
      actor: AuditActor;
      /** The decider's effective role from its validated token (undefined: none). */
      role: Role | undefined;
      decision: ApprovalDecision;
      justification: string;
      actionHash?: string;
      requestId: string;
      now: Date;
      /**
       * The decider's last interactive sign-in from its bearer token (`auth_time`; null: the token
       * carries none). Undefined for a channel turn, whose A1 trust the channel established (Teams SSO).
       */
      authTime?: number | null;
    }): Promise<DecisionResult> {
      // Spec §5 item 5: a decision re-authenticates. Checked before anything is read or decided.
      if (input.authTime !== undefined) {
        const maxAge = deps.reauthMaxAgeSeconds ?? DEFAULT_REAUTH_MAX_AGE_SECONDS;
        const freshness = authenticationFreshness(input.authTime, input.now.getTime(), maxAge);
        if (!freshness.fresh) {
          await audit.record({
            actor: input.actor,
            action: "console.approve_hil",
            target: input.approvalId,
            outcome: "denied",
            request_id: input.requestId,
            details: {
              reason: "reauthentication_required",
              freshness: freshness.reason,
              auth_age_seconds: freshness.age_seconds,
              max_age_seconds: maxAge,
              decision: input.decision,
              side_effect_class: "approve",
            },
          });
          throw new ToolError("reauthentication_required", reauthenticationText(maxAge), {
            max_age_seconds: maxAge,
          });
        }
      }
      const item = await store.get(input.approvalId);
      if (!item) throw new ToolError("not_found", `no approval ${input.approvalId}`);
      // A justification is free text: it is stored and shown only after the secret scanner.
      input = { ...input, justification: scanSecrets(input.justification).text };
      const base = {
        actor: input.actor,
        action: "console.approve_hil",
        target: item.approval_id,
        request_id: input.requestId,
      };
      const may = authority.mayDecide(
        { oid: input.actor.oid, role: input.role },
        { requesterOid: item.requester.oid, actionType: item.action.action_type },
      );
      if (item.state === "pending" && !may.allowed) {
        await audit.record({
          ...base,
          outcome: "denied",
          details: {
            reason: may.reason,
            invariant: may.reason,
            decision: input.decision,
            required_role: may.required_role,
            current_role: input.role ?? null,
            side_effect_class: "approve",
          },
        });
        if (may.reason === NO_SELF_APPROVAL)
          throw new ToolError(
            "self_approval",
            `refused by the ${NO_SELF_APPROVAL} invariant: the requester of ${item.approval_id} cannot decide it`,
          );
        throw new ToolError(
          "forbidden",
          `refused by the ${DECIDER_ROLE_BELOW_FLOOR} invariant: deciding ${item.action.action_type} requires the ${may.required_role} role; your current role is ${input.role ?? "none"}. Nothing was decided.`,
          { required_role: may.required_role },
        );
      }
      // The stored action must still be the one the hash bound, and a presented hash must match it.
      const expectedHash = actionHash(item.action);
      if (
        expectedHash !== item.action_hash ||
        (input.actionHash !== undefined && input.actionHash !== item.action_hash)
      ) {
        await audit.record({
          ...base,
          outcome: "denied",
          details: { reason: "action_hash_mismatch", side_effect_class: "approve" },
        });
        throw new ToolError("conflict", `the action_hash does not match approval ${item.approval_id}`);
      }
      if (
        input.decision === "approve" &&
        item.state === "pending" &&
        input.now.getTime() < Date.parse(item.expires_at)
      ) {
        const report = await deps.verify(item.action);
        if (report.verdict !== "eligible") {
          await audit.record({
            ...base,
            outcome: "denied",
            details: {
              reason: "verifier_recheck",
              verdict: report.verdict,
              missing_evidence: report.missing_evidence,
              side_effect_class: "approve",
            },
          });
          throw new ToolError(
            report.verdict === "abstain" ? "verifier_abstained" : "verifier_denied",
            `the verifier ${report.verdict === "abstain" ? "abstains" : "denies"} ${item.action.action_type} on ${item.action.target} now; the approval was not applied`,
            {
              missing_evidence: report.missing_evidence,
              ...(report.reason ? { reason: report.reason } : {}),
            },
          );
        }
      }
      const outcome = await store.decide(
        input.approvalId,
        {
          actor: input.actor,
          ...(input.role ? { role: input.role } : {}),
          decision: input.decision,
          justification: input.justification,
          action_hash: item.action_hash,
        },
        input.now,
      );
      if (!outcome) throw new ToolError("not_found", `no approval ${input.approvalId}`);
      switch (outcome.kind) {
        case "timeout":
          if (outcome.newlyTimedOut)
            await audit.record({
              actor: system,
              action: "console.approval_timeout",
              target: item.approval_id,
              outcome: "succeeded",
              request_id: input.requestId,
              details: { expires_at: item.expires_at },
            });
          return { outcome: "timeout", item: outcome.item };
        case "conflict":
          await audit.record({
            ...base,
            outcome: "denied",
            details: { reason: "decision_conflict", recorded: outcome.item.decision, side_effect_class: "approve" },
          });
          throw new ToolError(
            "conflict",
            `approval ${item.approval_id} already has a ${outcome.item.decision?.decision} decision by another actor or of another kind`,
          );
        case "self_approval":
          await audit.record({
            ...base,
            outcome: "denied",
            details: { reason: NO_SELF_APPROVAL, invariant: NO_SELF_APPROVAL, side_effect_class: "approve" },
          });
          throw new ToolError("self_approval", `refused by the ${NO_SELF_APPROVAL} invariant`);
        case "hash_mismatch":
          throw new ToolError("conflict", `the action_hash does not match approval ${item.approval_id}`);
        case "existing": {
          // A host that died between recording an approval and executing it left the action
          // unexecuted: the same actor's retry resumes it (executeApproved runs it at most once).
          const resumed =
            outcome.item.state === "approved" && !outcome.item.execution
              ? await this.executeApproved(item.approval_id, input.requestId, input.now)
              : undefined;
          return { outcome: "existing", item: resumed ?? outcome.item };
        }
        case "recorded": {
          await audit.record({
            ...base,
            outcome: "succeeded",
            details: {
              decision: input.decision,
              justification: input.justification,
              action_hash: item.action_hash,
              side_effect_class: "approve",
            },
          });
          const executed =
            input.decision === "approve"
              ? await this.executeApproved(item.approval_id, input.requestId, input.now)
              : outcome.item;
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
      // The decision is checked again here: an item decided by someone who may not authorize the
      // action (recorded before this rule, or by another writer) is never executed.
      const may = authority.mayDecide(
        { oid: actor.oid, role: item.decision?.role },
        { requesterOid: item.requester.oid, actionType: item.action.action_type },
      );
      const report = await deps.verify(item.action);
      if (!may.allowed)
        execution = {
          status: "refused",
          at: now.toISOString(),
          result: { reason: may.reason, required_role: may.required_role, decided_role: item.decision?.role ?? null },
        };
      else if ((await deps.killSwitch.isOn()) && item.action.action_type !== "kill_switch")
        execution = { status: "refused", at: now.toISOString(), result: { reason: "kill_switch_on" } };
      else if (report.verdict !== "eligible")
        execution = {
          status: "refused",
          at: now.toISOString(),
          result: { reason: "verifier", verdict: report.verdict, missing_evidence: report.missing_evidence },
        };
      else {
        try {
          execution = {
            status: "succeeded",
            at: now.toISOString(),
            result: await deps.executor.execute(item.action, { idempotencyKey: item.approval_id, actor, requestId }),
          };
        } catch (error) {
          // Another request holds this execution (the deciding one, still running it): it records the outcome.
          if (error instanceof ActionInProgressError) return store.get(approvalId);
          execution = {
            status: "failed",
            at: now.toISOString(),
            result: { error: error instanceof Error ? error.message : String(error) },
          };
        }
      }
      if (await store.recordExecution(approvalId, execution)) {
        await audit.record({
          actor,
          action: "console.action_executed",
          target: approvalId,
          outcome:
            execution.status === "succeeded" ? "succeeded" : execution.status === "refused" ? "denied" : "failed",
          request_id: requestId,
          details: {
            action_type: item.action.action_type,
            action_target: item.action.target,
            side_effect_class: "execute",
            result: execution.result,
          },
        });
      }
      return store.get(approvalId);
    },
  };
}

export type ApprovalService = ReturnType<typeof createApprovalService>;
