import { randomUUID } from "node:crypto";
import { odata } from "@azure/data-tables";
import { z } from "zod";
import type { ActionTypeCatalog } from "../actions/action-types.js";
import { RESOURCE_TYPES } from "../actions/action-types.js";
import { resourceTypeOf } from "../rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "../verifier/verifier.js";
import { newestFirstRowKey, type TableSource, tableOpener } from "../../storage/table-source.js";
import { pruneOlderThan } from "./table-retention.js";

/** Who proposed an action the verifier checked: the route it came by. */
export const ROUTE_ROLES = ["coordinator", "runbook", "ops_loop", "approval"] as const;
export type RouteRole = (typeof ROUTE_ROLES)[number];

/** The typed outcome of one attempt; `none` for an eligible one. */
export const FAILURE_CLASSES = [
  "none",
  "unknown_action_type",
  "wrong_target",
  "precondition_failed",
  "missing_evidence",
  "verifier_error",
] as const;
export type FailureClass = (typeof FAILURE_CLASSES)[number];

/** The version of the sanitized attempt row; rows without it (or with missing fields) are legacy. */
export const ATTEMPT_SCHEMA_VERSION = 1;

/**
 * One proposer attempt as retained: only the action type, a target reference, the decision, a
 * typed failure class and the route role. Parameters, prompt text, error messages and stacks are
 * never kept (C-098): they are not needed to judge recovery, and any of them may carry a secret.
 */
export const proposerAttemptSchema = z.strictObject({
  schema_version: z.literal(ATTEMPT_SCHEMA_VERSION),
  attempt_id: z.string().regex(/^[0-9a-f-]{36}$/),
  attempted_at: z.iso.datetime(),
  route_role: z.enum(ROUTE_ROLES),
  action_type: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/),
  target_ref: z.string().max(100),
  decision: z.enum(["eligible", "abstain", "deny", "error"]),
  failure_class: z.enum(FAILURE_CLASSES),
});
export type ProposerAttempt = z.output<typeof proposerAttemptSchema>;

export const ATTEMPTS_TABLE = "opsattempts";
const PARTITION = "attempts";
/** Attempts older than this are no longer retained (nor counted). */
export const ATTEMPT_RETENTION_MS = 7 * 86_400_000;
/** The recovery summary reads at most this many retained attempts, newest first. */
const MAX_READ = 1000;

/** A resource id as the control plane mints them; anything else (a pasted token, a sentence) is not kept. */
const SAFE_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** The target reference kept for an attempt: `type/id` when both look like ours, otherwise only what does. */
export function sanitizeTargetRef(target: string): string {
  const type = resourceTypeOf(target);
  if (!(RESOURCE_TYPES as readonly string[]).includes(type)) return "[redacted]";
  if (!target.includes("/")) return type;
  const id = target.slice(type.length + 1);
  // JWTs start `eyJ`; long opaque strings are more likely a credential than a resource id.
  return SAFE_ID.test(id) && !/^eyJ/.test(id) ? `${type}/${id}` : `${type}/[redacted]`;
}

function failureClassOf(report: VerifierReport, known: boolean): FailureClass {
  if (report.verdict === "eligible") return "none";
  if (report.verdict === "abstain") return "missing_evidence";
  if (!known) return "unknown_action_type";
  return report.checks.some((c) => c.result === "fail") ? "precondition_failed" : "wrong_target";
}

/** Turns what the verifier saw into the retained, sanitized attempt. */
export function sanitizeAttempt(input: {
  route_role: RouteRole;
  action: ProposedAction;
  outcome: { report: VerifierReport } | { error: unknown };
  catalog: ActionTypeCatalog;
  at: Date;
}): ProposerAttempt {
  const known = input.catalog.action_types.some((a) => a.id === input.action.action_type);
  const base = {
    schema_version: ATTEMPT_SCHEMA_VERSION,
    attempt_id: randomUUID(),
    attempted_at: input.at.toISOString(),
    route_role: input.route_role,
    action_type: known ? input.action.action_type : "unknown",
    target_ref: sanitizeTargetRef(String(input.action.target)),
  } as const;
  if ("error" in input.outcome) return { ...base, decision: "error", failure_class: "verifier_error" };
  return {
    ...base,
    decision: input.outcome.report.verdict,
    failure_class: failureClassOf(input.outcome.report, known),
  };
}

export interface AttemptLog {
  record(attempt: ProposerAttempt): Promise<void>;
  /** Retained attempts, newest first; `legacy_detail_gap` when a retained row predates the schema or lacks a field. */
  retained(): Promise<{ attempts: ProposerAttempt[]; legacy_detail_gap: boolean }>;
  /** Deletes (a batch of) attempts past retention; the producer calls it once a run, not each verify. */
  prune(): Promise<number>;
}

/** The retained proposer-attempt log (table `opsattempts`), newest first, seven days. */
export function createAttemptLog(source: TableSource, options: { now?: () => Date } = {}): AttemptLog {
  const table = tableOpener(source, ATTEMPTS_TABLE);
  const now = options.now ?? (() => new Date());
  return {
    async record(attempt) {
      const valid = proposerAttemptSchema.parse(attempt);
      await (await table()).createEntity({
        partitionKey: PARTITION,
        rowKey: newestFirstRowKey(new Date(valid.attempted_at), valid.attempt_id),
        ...valid,
      });
    },
    async retained() {
      const horizon = newestFirstRowKey(new Date(now().getTime() - ATTEMPT_RETENTION_MS), "~");
      const attempts: ProposerAttempt[] = [];
      let legacy_detail_gap = false;
      let read = 0;
      for await (const e of (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: odata`PartitionKey eq ${PARTITION} and RowKey le ${horizon}` },
      })) {
        const { partitionKey: _p, rowKey: _r, etag: _e, timestamp: _t, ...fields } = e;
        const parsed = proposerAttemptSchema.safeParse(fields);
        if (parsed.success) attempts.push(parsed.data);
        else legacy_detail_gap = true;
        if (++read >= MAX_READ) break;
      }
      return { attempts, legacy_detail_gap };
    },
    async prune() {
      return pruneOlderThan(await table(), PARTITION, new Date(now().getTime() - ATTEMPT_RETENTION_MS));
    },
  };
}

/**
 * The verifier hook: a `verify` that records every attempt it checks under `route_role`. The
 * verifier's answer (or error) passes through unchanged; a failure to record does not change it.
 */
export function recordingVerifier(
  verify: (action: ProposedAction) => Promise<VerifierReport>,
  log: AttemptLog,
  options: {
    route_role: RouteRole;
    catalog: ActionTypeCatalog;
    now?: () => Date;
    onRecordError?: (error: unknown) => void;
  },
): (action: ProposedAction) => Promise<VerifierReport> {
  const now = options.now ?? (() => new Date());
  const keep = async (action: ProposedAction, outcome: { report: VerifierReport } | { error: unknown }) => {
    try {
      await log.record(
        sanitizeAttempt({ route_role: options.route_role, action, outcome, catalog: options.catalog, at: now() }),
      );
    } catch (error) {
      options.onRecordError?.(error);
    }
  };
  return async (action) => {
    let report: VerifierReport;
    try {
      report = await verify(action);
    } catch (error) {
      await keep(action, { error });
      throw error;
    }
    await keep(action, { report });
    return report;
  };
}
