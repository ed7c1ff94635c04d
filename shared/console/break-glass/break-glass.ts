import { z } from "zod";
import type { AuditLog } from "../../ops/audit.js";
import type { Notifier } from "../../notify/types.js";
import { scanSecrets } from "../../ops/secret-scanner.js";

/** The spec's cap and default for a break-glass expiry (§2.3, §8): four hours. */
export const BREAK_GLASS_MAX_TTL_SECONDS = 14_400;

/** Break-glass settings; a `max_ttl_seconds` above 14,400 refuses to load. */
export const breakGlassConfigSchema = z.strictObject({
  max_ttl_seconds: z.number().int().min(60).max(BREAK_GLASS_MAX_TTL_SECONDS).default(BREAK_GLASS_MAX_TTL_SECONDS),
  /** Object ids of every Owner to page. */
  owners: z.array(z.string().min(1).max(200)).max(100).default([]),
});
export type BreakGlassConfig = z.output<typeof breakGlassConfigSchema>;

/** Validates break-glass settings at start (throws a ZodError naming the field). */
export function loadBreakGlassConfig(raw: unknown): BreakGlassConfig {
  return breakGlassConfigSchema.parse(raw ?? {});
}

/** The break-glass result (§2.3): not an entitlement; nothing is granted or stored for enforcement. */
export interface BreakGlassResult {
  activated_at: string;
  expires_at: string;
  reason: string;
  pager_receipt: { paged: number; confirmed: number; delivery_ids: string[] };
  audit_id: string;
}

/** Why a break-glass request was refused. */
export class BreakGlassDeniedError extends Error {
  constructor(
    readonly reason: "no_owner_page_confirmed",
    readonly audit_id: string,
  ) {
    super("break-glass denied: no Owner page was confirmed");
    this.name = "BreakGlassDeniedError";
  }
}

/**
 * Sanitizes a break-glass reason: markup and control characters removed, whitespace collapsed,
 * token-like values (bearer values, long secrets, key=value credentials) masked, 500 characters.
 */
export function sanitizeReason(reason: string): string {
  // Secrets first, by the one scanner: stripping markup before it would turn `bpt_x…` into `bptx…`,
  // which no pattern knows any more.
  const scanned = scanSecrets(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
    reason.replace(/[\u0000-\u001f\u007f]/g, " "),
  ).text;
  return (
    scanned
      .replace(/<[^>]*>/g, "")
      .replace(/\[redacted:[a-z_]+\]|[`*_~|[\]<>]/g, (m) => (m.startsWith("[redacted:") ? m : ""))
      // Stricter than the scanner here: a reason has no business holding any credential, short or not.
      .replace(/\bbearer[\s:=]+(?!\[redacted)\S+/gi, "Bearer [redacted]")
      .replace(/\b(password|secret|token|key|sig)\s*[:=]\s*(?!\[redacted)\S+/gi, "$1=[redacted]")
      // A long unbroken token is most likely a credential of a kind the scanner does not name.
      .replace(/\b[A-Za-z0-9+/_-]{32,}={0,2}/g, "[redacted]")
      .replace(/\s+/g, " ")
      .trim()
      .slice(0, 500)
  );
}

/** What activation needs. */
export interface BreakGlassDependencies {
  config: BreakGlassConfig;
  notifier: Notifier;
  audit: AuditLog;
}

/**
 * Activates break-glass: validates the reason and expiry, pages every configured Owner through
 * the notifier, and audits. With no confirmed page the request is denied and the denial audited.
 * It changes no principal, role or session: the caller's role stays what its token says.
 */
export async function activateBreakGlass(
  deps: BreakGlassDependencies,
  request: {
    actor: { oid: string; name: string };
    reason: string;
    expirySeconds?: number;
    requestId: string;
    now: Date;
  },
): Promise<BreakGlassResult> {
  const reason = sanitizeReason(request.reason);
  const ttl = request.expirySeconds ?? deps.config.max_ttl_seconds;
  const activated_at = request.now.toISOString();
  const expires_at = new Date(request.now.getTime() + ttl * 1000).toISOString();
  const receipts = [];
  for (const owner of deps.config.owners) {
    try {
      receipts.push(
        await deps.notifier.send({
          category: "A2",
          template_key: "break_glass.page",
          recipient: owner,
          title: "Break-glass activation",
          body_markdown: `Break-glass was activated by ${request.actor.name || request.actor.oid} until ${expires_at}. Reason: ${reason}`,
          params: { actor: request.actor.name || request.actor.oid, expires_at, reason },
          correlation_id: request.requestId,
          idempotency_key: `break_glass/${request.requestId}/${owner}`,
          // Through the paging and chat channels alike: every operational channel of the route.
          severity: "critical",
          fan_out: "all",
        }),
      );
    } catch {
      // A failed page is an unconfirmed page; the count below decides.
    }
  }
  const confirmed = receipts.filter((r) => r.confirmed);
  const pager_receipt = {
    paged: deps.config.owners.length,
    confirmed: confirmed.length,
    delivery_ids: confirmed.map((r) => r.delivery_id),
  };
  if (confirmed.length === 0) {
    const denial = await deps.audit.record({
      actor: request.actor,
      action: "console.break_glass",
      target: "break_glass",
      outcome: "denied",
      request_id: request.requestId,
      details: {
        reason: "no_owner_page_confirmed",
        requested_reason: reason,
        expires_at,
        pager_receipt,
        side_effect_class: "breakglass",
      },
    });
    throw new BreakGlassDeniedError("no_owner_page_confirmed", denial.audit_id);
  }
  const entry = await deps.audit.record({
    actor: request.actor,
    action: "console.break_glass",
    target: "break_glass",
    outcome: "succeeded",
    request_id: request.requestId,
    details: { requested_reason: reason, activated_at, expires_at, pager_receipt, side_effect_class: "breakglass" },
  });
  return { activated_at, expires_at, reason, pager_receipt, audit_id: entry.audit_id };
}
