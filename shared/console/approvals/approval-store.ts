import { createHash } from "node:crypto";
import { z } from "zod";
import { sameObjectId } from "../../auth/object-id.js";
import { canonicalJson } from "../../canonical-json.js";
import type { Role } from "../../auth/roles.js";
import type { AuditActor } from "../../ops/audit.js";
import type { Severity } from "../../ops/rules/rule-catalog.js";
import type { ProposedAction } from "../../ops/verifier/verifier.js";
import { isStatus, packText, unpackText } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";

/** An approval item's state: `pending` until one final outcome. */
export type ApprovalState = "pending" | "approved" | "rejected" | "timeout";
export type ApprovalDecision = "approve" | "reject";

/** One human-approval (A1) item: the exact action it binds, who asked, and how it ended. */
export interface ApprovalItem {
  /** Opaque: a digest of the idempotency key, so it says nothing about the action or a decision. */
  approval_id: string;
  idempotency_key: string;
  action: ProposedAction;
  /** SHA-256 over the canonical action (type, target, parameters); a decision must present it. */
  action_hash: string;
  requester: AuditActor;
  /** Why it was filed (`verifier_abstained`, `rbac_floor_not_met`, …). */
  reason: string;
  severity: Severity;
  created_at: string;
  expires_at: string;
  state: ApprovalState;
  /** `role`: the decider's effective role when it decided (checked again before execution). */
  decision?: { actor: AuditActor; role?: Role; decision: ApprovalDecision; justification: string; at: string };
  timed_out_at?: string;
  /** Set once the approved action ran (exactly once). */
  execution?: { status: "succeeded" | "failed" | "refused"; at: string; result: unknown };
}

/** What is filed; the store assigns the id, hash and times. */
export interface ApprovalRequestInput {
  idempotency_key: string;
  action: ProposedAction;
  requester: AuditActor;
  reason: string;
  severity: Severity;
  ttlSeconds: number;
}

/** The outcome of a decision attempt. */
export type DecideOutcome =
  | { kind: "recorded"; item: ApprovalItem }
  | { kind: "existing"; item: ApprovalItem }
  | { kind: "timeout"; item: ApprovalItem; newlyTimedOut: boolean }
  | { kind: "conflict"; item: ApprovalItem }
  | { kind: "self_approval"; item: ApprovalItem }
  | { kind: "hash_mismatch"; item: ApprovalItem };

export const APPROVALS_TABLE = "approvals";
export const APPROVAL_CLAIMS_TABLE = "approvalclaims";
const PARTITION = "a";

/** The `action_hash` binding an approval to the exact action, target and parameters. */
export function actionHash(action: ProposedAction): string {
  return createHash("sha256")
    .update(canonicalJson({ action_type: action.action_type, target: action.target, params: action.params }))
    .digest("hex");
}

/** The opaque approval id of a filing: a digest of its idempotency key. */
export function approvalIdOf(idempotencyKey: string): string {
  return `apr_${createHash("sha256").update(idempotencyKey).digest("hex").slice(0, 24)}`;
}

export const approvalIdSchema = z.string().regex(/^apr_[0-9a-f]{24}$/, "approval ids look like apr_ and 24 hex digits");

/**
 * The durable approval queue (table `approvals`). Writes are compare-and-swap on the entity's
 * ETag, so two hosts deciding or timing out the same item record one final outcome.
 */
export interface ApprovalStore {
  /** Parks an item; filing the same idempotency key again returns the first item. */
  file(input: ApprovalRequestInput, now: Date): Promise<ApprovalItem>;
  get(approvalId: string): Promise<ApprovalItem | undefined>;
  /** Every item still pending, oldest first. */
  listPending(): Promise<ApprovalItem[]>;
  /** Records a decision, or says why not (self-approval, timeout, conflict, wrong hash). */
  decide(
    approvalId: string,
    decision: {
      actor: AuditActor;
      role?: Role;
      decision: ApprovalDecision;
      justification: string;
      action_hash: string;
    },
    now: Date,
  ): Promise<DecideOutcome | undefined>;
  /** Moves a pending item whose TTL passed to `timeout`; true only for the call that did it. */
  expire(approvalId: string, now: Date): Promise<{ item: ApprovalItem; newlyTimedOut: boolean } | undefined>;
  /** Records the one execution of an approved item; false when one is already recorded. */
  recordExecution(approvalId: string, execution: NonNullable<ApprovalItem["execution"]>): Promise<boolean>;
  /** Claims a named one-time step (a reminder, a delivery) across hosts; true for the first claimer only. */
  claim(approvalId: string, step: string, now: Date): Promise<boolean>;
  /** Whether `step` of the item has been claimed (by anyone). */
  claimed(approvalId: string, step: string): Promise<boolean>;
  /**
   * Claims a group's digest across hosts, recording its members: the first claimer gets
   * `claimed: true`; everyone else reads the members the first one recorded.
   */
  claimDigest(
    digestId: string,
    members: readonly string[],
    now: Date,
  ): Promise<{ claimed: boolean; members: string[] }>;
}

/** Claims of group digests share the claims table under their own partition. */
const DIGEST_PARTITION = "digest";

export function createApprovalStore(source: TableSource): ApprovalStore {
  const table = tableOpener(source, APPROVALS_TABLE);
  const claims = tableOpener(source, APPROVAL_CLAIMS_TABLE);

  async function read(approvalId: string): Promise<{ item: ApprovalItem; etag: string } | undefined> {
    try {
      const entity = await (await table()).getEntity<Record<string, unknown>>(PARTITION, approvalId);
      return { item: JSON.parse(unpackText(entity, "doc")) as ApprovalItem, etag: String(entity.etag) };
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Applies `change` with optimistic concurrency; re-reads and retries when another writer won. */
  async function update(
    approvalId: string,
    change: (item: ApprovalItem) => ApprovalItem | undefined,
  ): Promise<{ before: ApprovalItem; after: ApprovalItem | undefined } | undefined> {
    for (;;) {
      const current = await read(approvalId);
      if (!current) return undefined;
      const next = change(current.item);
      if (!next) return { before: current.item, after: undefined };
      try {
        await (await table()).updateEntity(
          { partitionKey: PARTITION, rowKey: approvalId, state: next.state, ...packText("doc", JSON.stringify(next)) },
          "Replace",
          { etag: current.etag },
        );
        return { before: current.item, after: next };
      } catch (error) {
        if (!isStatus(error, 412)) throw error;
      }
    }
  }

  const expired = (item: ApprovalItem, now: Date) =>
    item.state === "pending" && now.getTime() >= Date.parse(item.expires_at);
  const timeoutOf = (item: ApprovalItem, now: Date): ApprovalItem => ({
    ...item,
    state: "timeout",
    timed_out_at: now.toISOString(),
  });

  return {
    async file(input, now) {
      const approval_id = approvalIdOf(input.idempotency_key);
      const item: ApprovalItem = {
        approval_id,
        idempotency_key: input.idempotency_key,
        action: input.action,
        action_hash: actionHash(input.action),
        requester: input.requester,
        reason: input.reason,
        severity: input.severity,
        created_at: now.toISOString(),
        expires_at: new Date(now.getTime() + input.ttlSeconds * 1000).toISOString(),
        state: "pending",
      };
      try {
        await (await table()).createEntity({
          partitionKey: PARTITION,
          rowKey: approval_id,
          state: item.state,
          ...packText("doc", JSON.stringify(item)),
        });
        return item;
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        return (await read(approval_id))?.item ?? item;
      }
    },

    get: async (approvalId) => (await read(approvalId))?.item,

    async listPending() {
      const out: ApprovalItem[] = [];
      const entities = (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: `PartitionKey eq '${PARTITION}' and state eq 'pending'` },
      });
      for await (const e of entities) out.push(JSON.parse(unpackText(e, "doc")) as ApprovalItem);
      return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
    },

    async decide(approvalId, decision, now) {
      let outcome: DecideOutcome | undefined;
      const result = await update(approvalId, (item) => {
        if (item.state === "timeout") {
          outcome = { kind: "timeout", item, newlyTimedOut: false };
          return undefined;
        }
        if (expired(item, now)) {
          const timedOut = timeoutOf(item, now);
          outcome = { kind: "timeout", item: timedOut, newlyTimedOut: true };
          return timedOut;
        }
        if (item.decision) {
          const same =
            sameObjectId(item.decision.actor.oid, decision.actor.oid) && item.decision.decision === decision.decision;
          outcome = { kind: same ? "existing" : "conflict", item };
          return undefined;
        }
        if (sameObjectId(decision.actor.oid, item.requester.oid)) {
          outcome = { kind: "self_approval", item };
          return undefined;
        }
        if (decision.action_hash !== item.action_hash) {
          outcome = { kind: "hash_mismatch", item };
          return undefined;
        }
        const decided: ApprovalItem = {
          ...item,
          state: decision.decision === "approve" ? "approved" : "rejected",
          decision: {
            actor: decision.actor,
            ...(decision.role ? { role: decision.role } : {}),
            decision: decision.decision,
            justification: decision.justification,
            at: now.toISOString(),
          },
        };
        outcome = { kind: "recorded", item: decided };
        return decided;
      });
      return result ? outcome : undefined;
    },

    async expire(approvalId, now) {
      let newlyTimedOut = false;
      const result = await update(approvalId, (item) => {
        newlyTimedOut = false;
        if (!expired(item, now)) return undefined;
        newlyTimedOut = true;
        return timeoutOf(item, now);
      });
      if (!result) return undefined;
      return { item: result.after ?? result.before, newlyTimedOut };
    },

    async recordExecution(approvalId, execution) {
      let recorded = false;
      await update(approvalId, (item) => {
        recorded = false;
        if (item.state !== "approved" || item.execution) return undefined;
        recorded = true;
        return { ...item, execution };
      });
      return recorded;
    },

    async claimed(approvalId, step) {
      try {
        await (await claims()).getEntity(approvalId, step);
        return true;
      } catch (error) {
        if (isStatus(error, 404)) return false;
        throw error;
      }
    },

    async claim(approvalId, step, now) {
      try {
        await (await claims()).createEntity({ partitionKey: approvalId, rowKey: step, claimed_at: now.toISOString() });
        return true;
      } catch (error) {
        if (isStatus(error, 409)) return false;
        throw error;
      }
    },

    async claimDigest(digestId, members, now) {
      const client = await claims();
      try {
        await client.createEntity({
          partitionKey: DIGEST_PARTITION,
          rowKey: digestId,
          claimed_at: now.toISOString(),
          ...packText("members", JSON.stringify(members)),
        });
        return { claimed: true, members: [...members] };
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const first = await client.getEntity<Record<string, unknown>>(DIGEST_PARTITION, digestId);
        return { claimed: false, members: JSON.parse(unpackText(first, "members")) as string[] };
      }
    },
  };
}
