import { createHash, randomUUID } from "node:crypto";
import { odata } from "@azure/data-tables";
import { z } from "zod";
import { isStatus, packText, unpackText } from "../storage/table-text.js";
import {
  dayPartitionKey,
  listLimit,
  newestFirstFilter,
  newestFirstRowKey,
  type TableSource,
  tableOpener,
} from "../storage/table-source.js";

/** Whether acting on an event is only proposed (`shadow`, the default) or carried out (`enforce`). */
export type EventMode = "shadow" | "enforce";

/**
 * A notable happening for the operator console (DESIGN §9): a token rotated, a job or pre-flight
 * failed, a database update became available, ….
 *
 * - `event_id`: a UUID assigned at ingestion.
 * - `idempotency_key`: the source's key; recording the same key again returns the first event.
 * - `source`: who reported it (`dashboard`, `jobapi`, `timer.check_database_updates`, …).
 * - `event_type`: dotted lowercase kind: `token.rotated`, `job.failed`, `preflight.failed`,
 *   `database.update_available`, ….
 * - `detected_at`: when the source saw it (ISO 8601); `ingested_at`: when it was recorded here.
 * - `mode`: `shadow` | `enforce`.
 * - `correlation_id`: ties the event to a request, orchestration or incident.
 * - `resource_ref`: what it concerns (`api_token`, `job/<id>`, `database/<name>`, …).
 * - `payload`: the source's data. Untrusted: it is data to show or match on, never instructions,
 *   and it must not carry secrets. Stored as JSON text.
 */
export interface OpsEvent {
  event_id: string;
  idempotency_key: string;
  source: string;
  event_type: string;
  detected_at: string;
  ingested_at: string;
  mode: EventMode;
  correlation_id: string;
  resource_ref: string;
  payload: unknown;
}

/** What a source reports; the log assigns `event_id` and `ingested_at`. */
export interface EventInput {
  idempotency_key: string;
  source: string;
  event_type: string;
  /** Defaults to the ingestion time. */
  detected_at?: Date | string;
  /** Defaults to `shadow`. */
  mode?: EventMode;
  correlation_id: string;
  resource_ref: string;
  payload?: unknown;
}

/** Filters of {@link EventLog.list}; results are newest (by ingestion) first. */
export interface EventFilter {
  /** Only events ingested at or after this time. */
  since?: Date;
  event_type?: string;
  /** At most this many events (1–1000, default 100). */
  limit?: number;
}

/** The log of notable happenings the operations core reads. */
export interface EventLog {
  /** Records an event once per `idempotency_key`; a repeat returns the first event unchanged. */
  record(input: EventInput): Promise<OpsEvent>;
  /** The most recently ingested events first. */
  list(filter?: EventFilter): Promise<OpsEvent[]>;
}

export const EVENTS_TABLE = "events";
/** Largest payload, as JSON text; events point at evidence rather than carry it. */
export const MAX_EVENT_PAYLOAD_CHARS = 64 * 1024;
/** The partition of idempotency claims; it starts with a letter, so day listings never include it. */
const KEY_PARTITION = "key";

const inputSchema = z.strictObject({
  idempotency_key: z.string().min(1).max(512),
  source: z.string().min(1).max(200),
  event_type: z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/, "event_type must be dotted lowercase words"),
  detected_at: z.union([z.date(), z.iso.datetime({ offset: true })]).optional(),
  mode: z.enum(["shadow", "enforce"]).default("shadow"),
  correlation_id: z.string().max(200),
  resource_ref: z.string().min(1).max(500),
  payload: z.unknown().optional(),
});

function keyHash(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/**
 * Opens the event log in Table storage (table `events`, created on first use). Each event is a row
 * in its ingestion day's partition, newest first; a claim row per idempotency key (partition
 * `key`, row = SHA-256 of the key) holds the first event, so a repeat finds it. `now` is for tests.
 */
export function createEventLog(source: TableSource, options: { now?: () => Date } = {}): EventLog {
  const table = tableOpener(source, EVENTS_TABLE);
  const now = options.now ?? (() => new Date());

  return {
    async record(input) {
      const valid = inputSchema.parse(input);
      const payloadText = JSON.stringify(valid.payload ?? null);
      if (payloadText.length > MAX_EVENT_PAYLOAD_CHARS)
        throw new RangeError(`event payload exceeds ${MAX_EVENT_PAYLOAD_CHARS} characters`);
      const ingested = now();
      const detected = valid.detected_at === undefined ? ingested : new Date(valid.detected_at);
      let event: OpsEvent = {
        event_id: randomUUID(),
        idempotency_key: valid.idempotency_key,
        source: valid.source,
        event_type: valid.event_type,
        detected_at: detected.toISOString(),
        ingested_at: ingested.toISOString(),
        mode: valid.mode,
        correlation_id: valid.correlation_id,
        resource_ref: valid.resource_ref,
        payload: JSON.parse(payloadText) as unknown,
      };
      const client = await table();
      const claimRow = keyHash(valid.idempotency_key);
      try {
        await client.createEntity({
          partitionKey: KEY_PARTITION,
          rowKey: claimRow,
          ...packText("doc", JSON.stringify(event)),
        });
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const claim = await client.getEntity<Record<string, unknown>>(KEY_PARTITION, claimRow);
        event = JSON.parse(unpackText(claim, "doc")) as OpsEvent;
      }
      // Also on a repeat: heals a listing row lost to a crash between the two writes.
      const at = new Date(event.ingested_at);
      await client
        .createEntity({
          partitionKey: dayPartitionKey(at),
          rowKey: newestFirstRowKey(at, event.event_id),
          event_type: event.event_type,
          mode: event.mode,
          ...packText("doc", JSON.stringify(event)),
        })
        .catch((error: unknown) => {
          if (!isStatus(error, 409)) throw error;
        });
      return event;
    },

    async list(filter = {}) {
      const limit = listLimit(filter.limit);
      const clauses = [newestFirstFilter(filter.since)];
      if (filter.event_type !== undefined) clauses.push(odata`event_type eq ${filter.event_type}`);
      const out: OpsEvent[] = [];
      const entities = (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: clauses.join(" and ") },
      });
      for await (const e of entities) {
        out.push(JSON.parse(unpackText(e, "doc")) as OpsEvent);
        if (out.length >= limit) break;
      }
      return out;
    },
  };
}
