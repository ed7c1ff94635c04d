import { createHash } from "node:crypto";
import { Webhook } from "standardwebhooks";
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
 * Not wired to a route yet (issue 26 follow-up): `POST /api/channels/webhooks/{source}`.
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
  | "replayed_nonce";

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

/**
 * Verifies a Standard Webhooks delivery (HMAC-SHA256 over `id.timestamp.body`, five-minute
 * timestamp tolerance, by the `standardwebhooks` library) and claims its `webhook-id` once: a
 * reused id is refused as a replay.
 */
export function createWebhookVerifier(options: { tables: TableSource }) {
  const nonces = tableOpener(options.tables, WEBHOOK_NONCE_TABLE);
  return async function verify(input: {
    source: string;
    secret: string;
    headers: Record<string, string>;
    body: string;
    now: Date;
  }): Promise<unknown> {
    let payload: unknown;
    try {
      payload = new Webhook(input.secret).verify(input.body, input.headers);
    } catch {
      throw new WebhookRefusedError("bad_signature", "invalid webhook signature");
    }
    const id = input.headers["webhook-id"] ?? "";
    try {
      await (await nonces()).createEntity({
        partitionKey: input.source,
        rowKey: createHash("sha256").update(id).digest("hex"),
        at: input.now.toISOString(),
      });
    } catch (error) {
      if (isStatus(error, 409)) throw new WebhookRefusedError("replayed_nonce", "this webhook-id was used before");
      throw error;
    }
    return payload;
  };
}
