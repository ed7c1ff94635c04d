import { createHash } from "node:crypto";
import { canonicalJson } from "../../canonical-json.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { ProposedAction } from "../verifier/verifier.js";

export const ACTION_OUTCOMES_TABLE = "actionoutcomes";

/**
 * What became of one execution, keyed by its idempotency key:
 * - `planned`: the plan was fixed and the act may have started (a crash here is resumed with the same plan);
 * - `done`: acted (enforce) or recorded what it would do (shadow); `result` is what the caller got;
 * - `refused`: the target had changed since verification; nothing was done.
 */
export interface ActionOutcome {
  idempotency_key: string;
  action_hash: string;
  action_type: string;
  target: string;
  state: "planned" | "done" | "refused";
  mode: "shadow" | "enforce";
  plan: unknown;
  result: unknown;
  at: string;
  /** For `planned`: until when the request that planned it holds it (a crashed holder's plan is resumed after). */
  lease_until?: string;
}

/** An outcome as read, with the ETag a takeover is conditional on. */
export type StoredActionOutcome = ActionOutcome & { etag: string };

/** The hash binding an outcome to its action: type, target and parameters. */
export function actionOutcomeHash(action: ProposedAction): string {
  return createHash("sha256")
    .update(canonicalJson({ action_type: action.action_type, target: action.target, params: action.params }))
    .digest("hex");
}

/** Idempotency keys are free text (`runbook/<request id>`); row keys may not hold `/`, so the row is the key's digest. */
function rowKey(idempotencyKey: string): string {
  return createHash("sha256").update(idempotencyKey).digest("hex");
}

const PARTITION = "outcome";

interface OutcomeEntity {
  idempotency_key: string;
  action_hash: string;
  action_type: string;
  target: string;
  state: ActionOutcome["state"];
  mode: ActionOutcome["mode"];
  plan_json: string;
  result_json: string;
  at: string;
  lease_until?: string;
}

function fromEntity(e: OutcomeEntity & { etag: string }): StoredActionOutcome {
  return {
    etag: e.etag,
    idempotency_key: e.idempotency_key,
    action_hash: e.action_hash,
    action_type: e.action_type,
    target: e.target,
    state: e.state,
    mode: e.mode,
    plan: JSON.parse(e.plan_json || "null"),
    result: JSON.parse(e.result_json || "null"),
    at: e.at,
    ...(e.lease_until ? { lease_until: e.lease_until } : {}),
  };
}

/** The outcomes of executed actions in Table storage (`actionoutcomes`), one row per idempotency key. */
export function createActionOutcomeStore(source: TableSource) {
  const table = tableOpener(source, ACTION_OUTCOMES_TABLE);
  const entity = (o: ActionOutcome) => ({
    partitionKey: PARTITION,
    rowKey: rowKey(o.idempotency_key),
    idempotency_key: o.idempotency_key,
    action_hash: o.action_hash,
    action_type: o.action_type,
    target: o.target,
    state: o.state,
    mode: o.mode,
    plan_json: JSON.stringify(o.plan ?? null),
    result_json: JSON.stringify(o.result ?? null),
    at: o.at,
    lease_until: o.lease_until ?? "",
  });
  async function get(idempotencyKey: string): Promise<StoredActionOutcome | undefined> {
    try {
      return fromEntity(await (await table()).getEntity<OutcomeEntity>(PARTITION, rowKey(idempotencyKey)));
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }
  return {
    get,
    /** Inserts `outcome` unless the key has one already: then answers the stored one (another host or an earlier attempt got there first). */
    async insert(
      outcome: ActionOutcome,
    ): Promise<{ inserted: true } | { inserted: false; existing: StoredActionOutcome }> {
      try {
        await (await table()).createEntity(entity(outcome));
        return { inserted: true };
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const existing = await get(outcome.idempotency_key);
        if (!existing) throw error;
        return { inserted: false, existing };
      }
    },
    /** Replaces `stored` with `outcome` only if nobody changed it since it was read (a takeover of an expired lease); false when someone did. */
    async replaceIfUnchanged(stored: StoredActionOutcome, outcome: ActionOutcome): Promise<boolean> {
      try {
        await (await table()).updateEntity(entity(outcome), "Replace", { etag: stored.etag });
        return true;
      } catch (error) {
        if (isStatus(error, 412)) return false;
        throw error;
      }
    },
    /** Records the final outcome of a planned execution (or gives up its lease). */
    async finish(outcome: ActionOutcome): Promise<void> {
      await (await table()).upsertEntity(entity(outcome), "Replace");
    },
  };
}

export type ActionOutcomeStore = ReturnType<typeof createActionOutcomeStore>;
