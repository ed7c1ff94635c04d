import { z } from "zod";
import { InvalidRequestError, NotFoundError, UnauthorizedError, ValidationError } from "../../errors.js";
import type { AuditLog } from "../../ops/audit.js";
import type { EventLog } from "../../ops/events.js";
import type { TableSource } from "../../storage/table-source.js";
import { jsonDepth } from "../platform-b/slack-inbound.js";
import {
  createWebhookVerifier,
  projectWebhook,
  typedWebhookMappingSchema,
  type TypedWebhookMapping,
  type WebhookAllowList,
  WebhookRefusedError,
} from "./typed-webhook.js";

/**
 * Inbound generic webhooks (spec operator-console.md §5 item 7′, §2.4 TypedWebhookMapping; issue
 * 26): `POST /api/channels/webhooks/{source}`. A configured source opts into one mapping; the
 * delivery is verified (Standard Webhooks HMAC-SHA256, timestamp window, monotonic timestamp,
 * single-use `webhook-id`), projected through the mapping, and recorded in the event log as a
 * `shadow` event of source `webhook.<source>` — the operations core's ingest, T0 and audit take it
 * from there. A webhook never executes an action: nothing here calls one, and the event's mode is
 * always `shadow`.
 */

/** A webhook body is a notification, not a document: larger ones are refused unread (413). */
export const WEBHOOK_BODY_LIMIT_BYTES = 64 * 1024;
const MAX_JSON_DEPTH = 32;
/** At most this many configured sources. */
export const WEBHOOK_SOURCE_LIMIT = 20;

const sourceName = z.string().regex(/^[a-z][a-z0-9-]{0,39}$/, "must be a lowercase source name (letters, digits, -)");
const secretRef = z
  .string()
  .regex(
    /^(kv:[A-Za-z0-9-]{1,127}|env:[A-Z_][A-Z0-9_]{0,127})$/,
    "must be a secret reference: kv:<secret name> or (local only) env:<VARIABLE>",
  );

/** `SVC_CHANNEL_WEBHOOKS_JSON`: the deployment's allow-list and its opted-in sources. */
export const webhookSettingsSchema = z
  .strictObject({
    allow: z.strictObject({
      event_types: z
        .array(z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/))
        .min(1)
        .max(50),
      agents: z
        .array(z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/))
        .min(1)
        .max(50),
    }),
    sources: z.record(sourceName, z.strictObject({ secret_ref: secretRef, mapping: typedWebhookMappingSchema })),
  })
  .superRefine((value, ctx) => {
    const names = Object.keys(value.sources);
    if (names.length === 0 || names.length > WEBHOOK_SOURCE_LIMIT)
      ctx.addIssue({ code: "custom", message: `1 to ${WEBHOOK_SOURCE_LIMIT} sources`, path: ["sources"] });
    for (const [name, source] of Object.entries(value.sources)) {
      const m = source.mapping;
      if (!value.allow.event_types.includes(m.event_type) || !value.allow.agents.includes(m.target_agent))
        ctx.addIssue({
          code: "custom",
          message: "the mapping's event type or target agent is not allow-listed",
          path: ["sources", name, "mapping"],
        });
      if (!Object.hasOwn(m.fields, m.session_field))
        ctx.addIssue({
          code: "custom",
          message: "session_field must name a projected field",
          path: ["sources", name, "mapping", "session_field"],
        });
    }
  });
export type WebhookSettings = z.output<typeof webhookSettingsSchema>;

/** Parses `SVC_CHANNEL_WEBHOOKS_JSON` (an `envParsed` parser: a thrown message names the problem). */
export function parseWebhookSettings(text: string): WebhookSettings {
  if (text.length > 100_000) throw new Error("is too long (at most 100,000 characters)");
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error("is not valid JSON");
  }
  const parsed = webhookSettingsSchema.safeParse(raw);
  if (!parsed.success)
    throw new Error(
      parsed.error.issues
        .slice(0, 5)
        .map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`)
        .join("; "),
    );
  return parsed.data;
}

/** What the route answers for an accepted delivery. */
export interface WebhookAccepted {
  event_id: string;
  event_type: string;
  target_agent: string;
  mode: "shadow";
}

const FAIL_BEFORE_PUBLISH = new Set(["missing_field", "container_value", "oversized_string", "target_not_allowed"]);

export function createWebhookInbound(deps: {
  settings: WebhookSettings;
  tables: TableSource;
  events: EventLog;
  audit: AuditLog;
  resolve(ref: string): Promise<string>;
  now?: () => Date;
}) {
  const now = deps.now ?? (() => new Date());
  const verify = createWebhookVerifier({ tables: deps.tables });
  const allow: WebhookAllowList = deps.settings.allow;
  const sources = new Map<string, { secretRef: string; mapping: TypedWebhookMapping }>(
    Object.entries(deps.settings.sources).map(([name, s]) => [name, { secretRef: s.secret_ref, mapping: s.mapping }]),
  );

  return {
    /** Whether `source` is configured (an unknown one is 404 before the body is read). */
    has: (source: string) => sources.has(source),

    /**
     * Handles one delivery whose body (at most {@link WEBHOOK_BODY_LIMIT_BYTES}) was read as text.
     * Throws the domain errors the transport maps: 404 (unknown source), 401 (signature,
     * timestamp, replay), 400 (not JSON, nested too deeply), 422 (the mapping refused it: nothing
     * published).
     */
    async handle(
      source: string,
      request: { headers: Headers; body: string; requestId: string },
    ): Promise<WebhookAccepted> {
      const configured = sources.get(source);
      if (!configured) throw new NotFoundError("no webhook source of that name is configured");
      const at = now();
      if (jsonDepth(request.body) > MAX_JSON_DEPTH) throw new InvalidRequestError("request body is nested too deeply");
      const headers: Record<string, string> = {};
      for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
        const value = request.headers.get(name);
        if (value !== null) headers[name] = value.slice(0, 4096);
      }
      let payload: unknown;
      try {
        payload = await verify({
          source,
          secret: await deps.resolve(configured.secretRef),
          headers,
          body: request.body,
          now: at,
        });
      } catch (error) {
        if (!(error instanceof WebhookRefusedError)) throw error;
        if (error.reason === "malformed_body") throw new InvalidRequestError("request body is not valid JSON");
        // One answer for every failure: the caller learns nothing about which check failed.
        throw new UnauthorizedError("invalid webhook signature");
      }
      let projected: ReturnType<typeof projectWebhook>;
      try {
        projected = projectWebhook(configured.mapping, allow, payload);
      } catch (error) {
        if (!(error instanceof WebhookRefusedError) || !FAIL_BEFORE_PUBLISH.has(error.reason)) throw error;
        await deps.audit.record({
          actor: { oid: `webhook:${source}`, name: `webhook ${source}` },
          action: "channel.webhook_refused",
          target: `webhook/${source}`,
          outcome: "denied",
          request_id: request.requestId,
          details: { reason: error.reason },
        });
        throw new ValidationError([{ loc: ["body"], msg: error.message, type: error.reason }]);
      }
      const event = await deps.events.record({
        idempotency_key: `webhook/${source}/${headers["webhook-id"] ?? ""}`,
        source: `webhook.${source}`,
        event_type: projected.event_type,
        detected_at: at,
        // Never `enforce`: a webhook proposes, it never executes (C-446).
        mode: "shadow",
        correlation_id: projected.session_key,
        resource_ref: `webhook/${source}`,
        payload: { target_agent: projected.target_agent, session_key: projected.session_key, fields: projected.fields },
      });
      await deps.audit.record({
        actor: { oid: `webhook:${source}`, name: `webhook ${source}` },
        action: "channel.webhook_ingested",
        target: event.event_id,
        outcome: "succeeded",
        request_id: request.requestId,
        details: { event_type: event.event_type, target_agent: projected.target_agent },
      });
      return {
        event_id: event.event_id,
        event_type: event.event_type,
        target_agent: projected.target_agent,
        mode: "shadow",
      };
    },
  };
}
