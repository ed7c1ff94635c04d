import { createHash } from "node:crypto";
import { loadStandardWebhooks } from "../../lazy-sdks.js";
import { z } from "zod";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";

/**
 * Inbound generic webhooks, domain part (spec operator-console.md §2.4 TypedWebhookMapping, §5
 * item 7; ledger C-436–C-446). A configured source opts into one mapping: a fixed, allow-listed
 * normalized event type and target agent, and a bounded projection of scalar fields by
 * server-owned dot paths. Nothing in the payload can choose the event type, the agent, a command
 * or the session: those come from the mapping, and the session key is the SHA-256 of one chosen
 * scalar. A missing field, a container where a scalar belongs, an oversized string or a target
 * outside the allow-list fails before anything is published. The projected event is shadow-mode
 * data for the operations core (ingest, T0, audit); a webhook never executes an action.
 *
 * The route `POST /api/channels/webhooks/{source}` runs it through `webhook-inbound.ts`.
 */

const dotPath = z
  .string()
  .regex(/^[A-Za-z0-9_]{1,64}(\.[A-Za-z0-9_]{1,64}){0,7}$/, "must be a dot path of up to 8 plain names")
  .refine((p) => !p.split(".").some((s) => ["__proto__", "constructor", "prototype"].includes(s)), "reserved name");

export const typedWebhookMappingSchema = z.strictObject({
  event_type: z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/, "must be a dotted lowercase event type"),
  target_agent: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/),
  /** Projected field name → dot path in the payload (at most 16). */
  fields: z
    .record(z.string().regex(/^[a-z][a-z0-9_]{0,31}$/), dotPath)
    .refine((f) => Object.keys(f).length >= 1 && Object.keys(f).length <= 16, "1 to 16 fields"),
  /** The projected field whose value's SHA-256 is the session key. */
  session_field: z.string(),
  max_string_chars: z.number().int().min(1).max(4096).default(256),
});
export type TypedWebhookMapping = z.output<typeof typedWebhookMappingSchema>;

/** What a deployment allows webhooks to target. */
export interface WebhookAllowList {
  event_types: readonly string[];
  agents: readonly string[];
}

export type WebhookRefusal =
  | "target_not_allowed"
  | "missing_field"
  | "container_value"
  | "oversized_string"
  | "bad_signature"
  | "stale_timestamp"
  | "replayed_nonce"
  | "malformed_body";

export class WebhookRefusedError extends Error {
  constructor(
    readonly reason: WebhookRefusal,
    message: string,
  ) {
    super(message);
    this.name = "WebhookRefusedError";
  }
}

/** A projected event: everything but `fields` comes from the mapping. */
export interface ProjectedWebhookEvent {
  event_type: string;
  target_agent: string;
  session_key: string;
  fields: Record<string, string | number | boolean | null>;
}

function valueAt(payload: unknown, path: string): unknown {
  let current: unknown = payload;
  for (const name of path.split(".")) {
    if (current === null || typeof current !== "object" || Array.isArray(current) || !Object.hasOwn(current, name))
      return undefined;
    current = (current as Record<string, unknown>)[name];
  }
  return current;
}

/**
 * Projects a verified payload through its mapping, or refuses before anything is published.
 * `allow` is checked first: a mapping naming a target outside it never projects.
 */
export function projectWebhook(
  mapping: TypedWebhookMapping,
  allow: WebhookAllowList,
  payload: unknown,
): ProjectedWebhookEvent {
  if (!allow.event_types.includes(mapping.event_type) || !allow.agents.includes(mapping.target_agent))
    throw new WebhookRefusedError("target_not_allowed", "the mapping's event type or agent is not allow-listed");
  const fields: ProjectedWebhookEvent["fields"] = {};
  for (const [name, path] of Object.entries(mapping.fields)) {
    const value = valueAt(payload, path);
    if (value === undefined) throw new WebhookRefusedError("missing_field", `field ${name} (${path}) is missing`);
    if (value !== null && typeof value === "object")
      throw new WebhookRefusedError("container_value", `field ${name} (${path}) is not a scalar`);
    if (typeof value === "string" && value.length > mapping.max_string_chars)
      throw new WebhookRefusedError(
        "oversized_string",
        `field ${name} (${path}) is longer than ${mapping.max_string_chars}`,
      );
    fields[name] = value as string | number | boolean | null;
  }
  const session = fields[mapping.session_field];
  if (session === undefined)
    throw new WebhookRefusedError("missing_field", `the session field ${mapping.session_field} is not projected`);
  return {
    event_type: mapping.event_type,
    target_agent: mapping.target_agent,
    session_key: createHash("sha256")
      .update(`webhook-session/${JSON.stringify(session)}`)
      .digest("hex"),
    fields,
  };
}

export const WEBHOOK_NONCE_TABLE = "channelwebhooknonces";
/** Standard Webhooks' timestamp tolerance (the `standardwebhooks` library's, both directions). */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;
/** The partition of each source's newest accepted timestamp (nonce partitions are source names). */
const HIGH_WATER = "~hw";

/**
 * Verifies a Standard Webhooks delivery (HMAC-SHA256 over `id.timestamp.body`, compared in constant
 * time, five-minute timestamp tolerance, by the `standardwebhooks` library), then the source's
 * monotonic timestamp (a delivery older than the newest one accepted from that source is refused;
 * timestamps are whole seconds, so an equal one passes and the nonce decides), then claims its
 * `webhook-id` once: a reused id is refused as a replay. The nonce row keeps `expires_at` (past
 * the tolerance a replay fails the timestamp check anyway), so the pruning timer can drop it.
 */
export function createWebhookVerifier(options: { tables: TableSource }) {
  const nonces = tableOpener(options.tables, WEBHOOK_NONCE_TABLE);

  /** Raises the source's high-water timestamp, or refuses a delivery older than it. */
  async function monotonic(source: string, timestamp: number): Promise<void> {
    const t = await nonces();
    for (let attempt = 0; attempt < 5; attempt++) {
      let current: { ts: number; etag: string } | undefined;
      try {
        const row = await t.getEntity<{ ts: number }>(HIGH_WATER, source);
        current = { ts: Number(row.ts), etag: row.etag };
      } catch (error) {
        if (!isStatus(error, 404)) throw error;
      }
      if (current && timestamp < current.ts)
        throw new WebhookRefusedError("stale_timestamp", "the delivery is older than one already accepted");
      if (current && timestamp === current.ts) return;
      try {
        if (current)
          await t.updateEntity({ partitionKey: HIGH_WATER, rowKey: source, ts: timestamp }, "Replace", {
            etag: current.etag,
          });
        else await t.createEntity({ partitionKey: HIGH_WATER, rowKey: source, ts: timestamp });
        return;
      } catch (error) {
        // Another delivery moved the mark first: read it again.
        if (isStatus(error, 409) || isStatus(error, 412)) continue;
        throw error;
      }
    }
    throw new WebhookRefusedError("stale_timestamp", "the delivery's timestamp could not be ordered; retry");
  }

  return async function verify(input: {
    source: string;
    secret: string;
    headers: Record<string, string>;
    body: string;
    now: Date;
  }): Promise<unknown> {
    // The verifier's library loads on the first delivery (shared/lazy-sdks.ts).
    const { Webhook } = await loadStandardWebhooks();
    let payload: unknown;
    try {
      payload = new Webhook(input.secret).verify(input.body, input.headers);
    } catch (error) {
      // A body that is signed but not JSON: the library's parse fails after the signature passed.
      if (error instanceof SyntaxError) throw new WebhookRefusedError("malformed_body", "the body is not valid JSON");
      throw new WebhookRefusedError("bad_signature", "invalid webhook signature");
    }
    await monotonic(input.source, Number(input.headers["webhook-timestamp"]));
    const id = input.headers["webhook-id"] ?? "";
    try {
      await (await nonces()).createEntity({
        partitionKey: input.source,
        rowKey: createHash("sha256").update(id).digest("hex"),
        at: input.now.toISOString(),
        expires_at: new Date(input.now.getTime() + 2 * WEBHOOK_TOLERANCE_SECONDS * 1000).toISOString(),
      });
    } catch (error) {
      if (isStatus(error, 409)) throw new WebhookRefusedError("replayed_nonce", "this webhook-id was used before");
      throw error;
    }
    return payload;
  };
}
