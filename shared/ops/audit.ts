import { createHash, randomUUID } from "node:crypto";
import { odata } from "@azure/data-tables";
import { z } from "zod";
import type { Role } from "../auth/roles.js";
import type { EvidenceStore } from "./evidence-store.js";
import {
  dayPartitionKey,
  listLimit,
  newestFirstFilter,
  newestFirstRowKey,
  type TableSource,
  tableOpener,
} from "../storage/table-source.js";
import { packText, unpackText } from "../storage/table-text.js";

export type { TableClientFactory, TableSource } from "../storage/table-source.js";

/** Who acted: the caller's directory object id and display name. */
export interface AuditActor {
  oid: string;
  name: string;
}

/** How a privileged act ended: done, refused for lack of a role, or attempted and failed. */
export type AuditOutcome = "succeeded" | "denied" | "failed";

/**
 * One audit entry — the one schema of the audit log (table `audit`).
 *
 * - `audit_id`: a UUID, unique per entry.
 * - `at`: when the entry was recorded (ISO 8601, UTC).
 * - `actor`: who acted (`oid`, `name`), from the validated caller — never from the request body.
 * - `action`: dotted lowercase name of the act: `api_token.reveal`, `api_token.regenerate`,
 *   `workspace.update`, ….
 * - `target`: what was acted on (`api_token`, `workspace`, a job id, …).
 * - `outcome`: `succeeded`, `denied` (the caller's role was too low) or `failed`.
 * - `request_id`: the request's id, to find the server's logs of the same act.
 * - `details`: facts about the act (changed field names, an expiry time, a refusal reason). Never
 *   secrets: values under keys named like tokens, secrets, passwords or keys are stored as
 *   `[redacted]` whatever the caller passes. Tool evidence too large to keep inline is referenced
 *   by its content address (`evidence_blob`, see {@link auditEvidence}).
 *
 * Storage: one partition per UTC day (newest day first), row keys newest first, so a listing reads
 * the most recent entries without sorting. Entries are only ever inserted; no code updates or
 * deletes them (retention belongs to the storage account's policy, not to this module).
 */
export interface AuditEntry {
  audit_id: string;
  at: string;
  actor: AuditActor;
  action: string;
  target: string;
  outcome: AuditOutcome;
  request_id: string;
  details: Record<string, unknown>;
}

/** What a caller records; the log assigns `audit_id` and `at`. */
export interface AuditInput {
  actor: AuditActor;
  action: string;
  target: string;
  outcome: AuditOutcome;
  request_id: string;
  details?: Record<string, unknown>;
}

/** Filters of {@link AuditLog.list}; results are newest first. */
export interface AuditFilter {
  /** Only entries recorded at or after this time. */
  since?: Date;
  /** Only entries of this action. */
  action?: string;
  /** At most this many entries (1–1000, default 100). */
  limit?: number;
  /** Only entries after this one in the listing's order (newest first; same millisecond: by id), to continue a listing. */
  after?: { at: string; audit_id: string };
}

/** The append-only audit log of privileged acts. */
export interface AuditLog {
  /** Appends one entry and returns it as stored. */
  record(entry: AuditInput): Promise<AuditEntry>;
  /** The most recent entries first. */
  list(filter?: AuditFilter): Promise<AuditEntry[]>;
}

export const AUDIT_TABLE = "audit";

const inputSchema = z.strictObject({
  actor: z.strictObject({ oid: z.string().min(1).max(200), name: z.string().max(200) }),
  action: z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/, "action must be dotted lowercase words"),
  target: z.string().min(1).max(500),
  outcome: z.enum(["succeeded", "denied", "failed"]),
  request_id: z.string().min(1).max(200),
  details: z.record(z.string(), z.unknown()).optional(),
});

/** Keys whose values never reach the audit log (the logger's rule, plus API, access and private keys). */
const SECRET_KEYS =
  /(authorization|token|secret|password|connection_?string|(?:account|api|access|private)_?key|sig)$/i;

function redact(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== "object") return value;
  if (depth > 8) return "[truncated]";
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEYS.test(k) ? "[redacted]" : redact(v, depth + 1);
  return out;
}

function fromEntity(e: Record<string, unknown>): AuditEntry {
  return {
    audit_id: String(e.audit_id),
    at: String(e.at),
    actor: { oid: String(e.actor_oid), name: String(e.actor_name ?? "") },
    action: String(e.action),
    target: String(e.target),
    outcome: String(e.outcome) as AuditOutcome,
    request_id: String(e.request_id),
    details: JSON.parse(unpackText(e, "details") || "{}") as Record<string, unknown>,
  };
}

/**
 * Opens the audit log in Table storage (table `audit`, created on first use). `now` is for tests.
 */
export function createAuditLog(source: TableSource, options: { now?: () => Date } = {}): AuditLog {
  const table = tableOpener(source, AUDIT_TABLE);
  const now = options.now ?? (() => new Date());
  return {
    async record(input) {
      const valid = inputSchema.parse(input);
      const at = now();
      const entry: AuditEntry = {
        audit_id: randomUUID(),
        at: at.toISOString(),
        actor: valid.actor,
        action: valid.action,
        target: valid.target,
        outcome: valid.outcome,
        request_id: valid.request_id,
        details: redact(valid.details ?? {}) as Record<string, unknown>,
      };
      // createEntity only: an existing row is never overwritten.
      await (await table()).createEntity({
        partitionKey: dayPartitionKey(at),
        rowKey: newestFirstRowKey(at, entry.audit_id),
        audit_id: entry.audit_id,
        at: entry.at,
        actor_oid: entry.actor.oid,
        actor_name: entry.actor.name,
        action: entry.action,
        target: entry.target,
        outcome: entry.outcome,
        request_id: entry.request_id,
        ...packText("details", JSON.stringify(entry.details)),
      });
      return entry;
    },

    async list(filter = {}) {
      const limit = listLimit(filter.limit);
      const clauses = [newestFirstFilter(filter.since)];
      if (filter.action !== undefined) clauses.push(odata`action eq ${filter.action}`);
      if (filter.after) {
        // Row keys order the whole log (inverted milliseconds, then id); the partition bound keeps the scan short.
        const at = new Date(filter.after.at);
        if (Number.isNaN(at.getTime())) throw new RangeError("after.at must be a timestamp");
        clauses.push(
          odata`PartitionKey ge ${dayPartitionKey(at)} and RowKey gt ${newestFirstRowKey(at, filter.after.audit_id)}`,
        );
      }
      const out: AuditEntry[] = [];
      const entities = (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: clauses.join(" and ") },
      });
      for await (const e of entities) {
        out.push(fromEntity(e));
        if (out.length >= limit) break;
      }
      return out;
    },
  };
}

/** Tool evidence up to this many characters (as JSON) is kept in the audit entry itself. */
export const AUDIT_INLINE_EVIDENCE_CHARS = 16_000;

/**
 * What an audit entry keeps of a tool's evidence: small evidence inline (`evidence`); larger
 * evidence as its SHA-256 and size and, with an evidence store, in the store — content-addressed,
 * write-once, readable by id from `rbacFloor` up — referenced as `evidence_blob`. A store that
 * cannot take it leaves the digest and says so (`evidence_blob_error`): the entry is still written.
 */
export async function auditEvidence(
  data: unknown,
  options: { store?: EvidenceStore; rbacFloor: Role },
): Promise<Record<string, unknown>> {
  // Stored evidence gets the same redaction as an entry's details (secret-named keys), wherever it is kept.
  const safe = redact(data);
  const text = JSON.stringify(safe) ?? "null";
  if (text.length <= AUDIT_INLINE_EVIDENCE_CHARS) return { evidence: safe };
  const digest = { evidence_sha256: createHash("sha256").update(text).digest("hex"), evidence_chars: text.length };
  if (!options.store) return digest;
  try {
    const stored = await options.store.put(Buffer.from(text, "utf8"), "application/json", options.rbacFloor);
    return { ...digest, evidence_blob: { evidence_id: stored.evidence_id, sha256: stored.sha256, size: stored.size } };
  } catch {
    return { ...digest, evidence_blob_error: "the evidence store did not take it" };
  }
}
