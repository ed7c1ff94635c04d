import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import { parseYamlCatalog } from "../config/yaml-catalog.js";
import { CatalogLoadError } from "../ops/catalog/json-catalog.js";
import { NOTIFICATION_CATEGORIES, type NotificationCategory } from "./types.js";

/**
 * The outbound routing matrix, `config/notifications-matrix.yaml` (spec operator-console.md §2.5,
 * §8 special routing rules, §9 item 1): which channel each route tries first, which next, and
 * which route takes over when all fail. Validated at start; every refusal names `file:line: field`.
 */

/**
 * What each channel kind may carry (spec §5 item 4, the channel trust matrix). `per_recipient`
 * kinds address one person per message; the others post to their configured audience, so one
 * message per correlation is sent there whoever it was addressed to.
 */
export const CHANNEL_KINDS = {
  /** Chat platform A (Teams), same tenant: single sign-on. */
  platform_a: { categories: ["A1", "A2", "A3", "A4"], per_recipient: true, local_only: false },
  /** Chat platform A, guest tenant: A1 denied. */
  platform_a_guest: { categories: ["A2", "A3", "A4"], per_recipient: true, local_only: false },
  /** Chat platform B (Slack): A1 refused while no user mapping exists. */
  platform_b: { categories: ["A2", "A3", "A4"], per_recipient: false, local_only: false },
  email: { categories: ["A2", "A4"], per_recipient: false, local_only: false },
  webhook: { categories: ["A2"], per_recipient: false, local_only: false },
  paging: { categories: ["A2"], per_recipient: false, local_only: false },
  sms: { categories: ["A2"], per_recipient: false, local_only: false },
  /**
   * The local stack's desk inbox: one file per message and recipient under the data folder, so a
   * person trying the product sees approval requests. Refused outside the local profile.
   */
  local_inbox: { categories: ["A1", "A2", "A4"], per_recipient: true, local_only: true },
} as const satisfies Record<
  string,
  { categories: readonly NotificationCategory[]; per_recipient: boolean; local_only: boolean }
>;
export type ChannelKind = keyof typeof CHANNEL_KINDS;
const channelKinds = Object.keys(CHANNEL_KINDS) as [ChannelKind, ...ChannelKind[]];

/** Trust tiers of routes (spec §2.5) and the category each carries. */
export const TRUST_TIERS = {
  a1_hil_approval: "A1",
  a2_operational_alert: "A2",
  a4_digest: "A4",
} as const satisfies Record<string, NotificationCategory>;
export type TrustTier = keyof typeof TRUST_TIERS;
const TIER_RANK: Record<NotificationCategory, number> = { A1: 4, A2: 3, A3: 2, A4: 1 };

/** The route of the break-glass usage summary: the only one allowed the `role-dm` audience (spec §8). */
export const BREAK_GLASS_USAGE_ROUTE = "digest_break_glass_usage";
/** Metadata fields a `mention-artifact-owner` route may name (spec §8). */
export const ARTIFACT_OWNER_FIELDS = [
  "rule_author",
  "override_requester",
  "exemption_requester",
  "pr_author_and_reviewers",
] as const;

const name = z.string().regex(/^[a-z][a-z0-9_]{0,62}$/, "must be lowercase letters, digits and '_' (at most 63)");

const channelSchema = z.strictObject({
  kind: z.enum(channelKinds),
  /** The categories this channel is declared for; each must be allowed for its kind. */
  categories: z.array(z.enum(NOTIFICATION_CATEGORIES)).min(1).max(4),
  /** The message catalog this channel renders with (spec §9 item 4). */
  locale: z.enum(["en", "ko"]).default("en"),
  /** The bounded retry budget of one send on this channel (spec §8). */
  retry: z
    .strictObject({
      max_attempts: z.number().int().min(1).max(5).default(3),
      initial_backoff_ms: z.number().int().min(0).max(60_000).default(500),
      max_backoff_ms: z.number().int().min(0).max(120_000).default(30_000),
    })
    .default({ max_attempts: 3, initial_backoff_ms: 500, max_backoff_ms: 30_000 }),
  /** One attempt's time limit: past it the attempt is aborted and counted ambiguous. */
  timeout_ms: z.number().int().min(100).max(60_000).default(10_000),
  /**
   * Paging: the runbook a page links when the message names none (mandatory for paging, spec §8):
   * an HTTPS URL, or a path on the console (`SVC_CONSOLE_BASE_URL`).
   */
  runbook_url: z
    .string()
    .max(2000)
    .regex(/^(https:\/\/[^\s]+|\/[^\s]*)$/, "must be an https:// URL or a path on the console starting with /")
    .optional(),
});
export type ChannelConfig = z.output<typeof channelSchema>;

const routeSchema = z.strictObject({
  trust_tier: z.enum(Object.keys(TRUST_TIERS) as [TrustTier, ...TrustTier[]]),
  primary: name,
  fallback: z.array(name).max(10).default([]),
  on_all_fail: name.optional(),
  /** Who the route reaches: the channels' operational audience, one Owner's direct message, or the artifact's owner. */
  audience: z.enum(["operational", "role-dm", "mention-artifact-owner"]).default("operational"),
  metadata_fields: z.array(z.enum(ARTIFACT_OWNER_FIELDS)).max(4).optional(),
  /**
   * A digest route's period (UTC day, ISO week from Monday, calendar month); unset, it is read
   * from the route name's suffix (`digest_shadow_accuracy_daily`). Only on a4_digest routes.
   */
  period: z.enum(["daily", "weekly", "monthly"]).optional(),
  /**
   * An a2_operational_alert route's digest for low-severity notices: a `batchable` message of
   * severity low or info is batched into this a4_digest route instead of sent at once.
   */
  low_severity_digest: name.optional(),
});
export type RouteConfig = z.output<typeof routeSchema>;

const matrixSchema = z
  .strictObject({
    matrix: z.strictObject({
      version: z.literal(1, "must be 1 (the only matrix version)"),
      default_route: name,
      channels: z.record(name, channelSchema).refine((c) => Object.keys(c).length > 0, "needs at least one channel"),
      routes: z.record(name, routeSchema).refine((r) => Object.keys(r).length > 0, "needs at least one route"),
    }),
  })
  .superRefine(({ matrix }, ctx) => {
    const problem = (path: (string | number)[], message: string) =>
      ctx.addIssue({ code: "custom", path: ["matrix", ...path], message });
    for (const [id, channel] of Object.entries(matrix.channels)) {
      const allowed: readonly NotificationCategory[] = CHANNEL_KINDS[channel.kind].categories;
      channel.categories.forEach((category, i) => {
        if (!allowed.includes(category))
          problem(
            ["channels", id, "categories", i],
            `${category} is not allowed on a ${channel.kind} channel (spec §5 item 4 allows ${allowed.join(", ")})`,
          );
      });
      if (channel.kind === "paging" && !channel.runbook_url)
        problem(["channels", id], "a paging channel needs runbook_url (a runbook URL is mandatory on every page)");
    }
    if (!matrix.routes[matrix.default_route])
      problem(["default_route"], `names no route of this matrix: ${matrix.default_route}`);
    for (const [routeName, route] of Object.entries(matrix.routes)) {
      const category = TRUST_TIERS[route.trust_tier];
      const at = (...rest: (string | number)[]) => ["routes", routeName, ...rest];
      const seen = new Set<string>();
      for (const [i, id] of [route.primary, ...route.fallback].entries()) {
        const path = i === 0 ? at("primary") : at("fallback", i - 1);
        const channel = matrix.channels[id];
        if (!channel) {
          problem(path, `unknown channel: ${id}`);
          continue;
        }
        if (seen.has(id)) {
          problem(path, `channel ${id} appears twice: a cycle in the fallbacks`);
          continue;
        }
        seen.add(id);
        if (!channel.categories.includes(category)) {
          const best = Math.max(...channel.categories.map((c) => TIER_RANK[c]));
          problem(
            path,
            i > 0 && best < TIER_RANK[category]
              ? `fallback ${id} lowers the trust tier: ${route.trust_tier} needs ${category} and ${id} declares ${channel.categories.join(", ")}`
              : `channel ${id} does not declare ${category}, the category of ${route.trust_tier}`,
          );
        }
      }
      if (route.on_all_fail !== undefined) {
        const next = matrix.routes[route.on_all_fail];
        if (!next) problem(at("on_all_fail"), `unknown route: ${route.on_all_fail}`);
        else if (TIER_RANK[TRUST_TIERS[next.trust_tier]] < TIER_RANK[category])
          problem(at("on_all_fail"), `${route.on_all_fail} lowers the trust tier of ${route.trust_tier}`);
        // A cycle through on_all_fail would never end.
        const chain = [routeName];
        for (let r: string | undefined = route.on_all_fail; r !== undefined; r = matrix.routes[r]?.on_all_fail) {
          if (chain.includes(r)) {
            problem(at("on_all_fail"), `a cycle: ${[...chain, r].join(" → ")}`);
            break;
          }
          chain.push(r);
        }
      }
      if (route.audience === "role-dm" && routeName !== BREAK_GLASS_USAGE_ROUTE)
        problem(at("audience"), `role-dm is only for the break-glass usage summary (${BREAK_GLASS_USAGE_ROUTE})`);
      // A direct message reaches one person: never a channel that posts to a shared audience.
      if (route.audience === "role-dm")
        [route.primary, ...route.fallback].forEach((id, i) => {
          const channel = matrix.channels[id];
          if (channel && !CHANNEL_KINDS[channel.kind].per_recipient)
            problem(
              i === 0 ? at("primary") : at("fallback", i - 1),
              `${id} is a channel of kind ${channel.kind}, which posts to a shared audience; a role-dm route names only per-recipient channels (platform_a, platform_a_guest, local_inbox)`,
            );
        });
      if (route.audience === "mention-artifact-owner" && !route.metadata_fields?.length)
        problem(at("audience"), `mention-artifact-owner needs metadata_fields (${ARTIFACT_OWNER_FIELDS.join(", ")})`);
      if (route.low_severity_digest !== undefined) {
        const digest = matrix.routes[route.low_severity_digest];
        if (route.trust_tier !== "a2_operational_alert")
          problem(at("low_severity_digest"), "only an a2_operational_alert route batches low-severity notices");
        else if (!digest || !digestPeriodOf(route.low_severity_digest, digest))
          problem(
            at("low_severity_digest"),
            `${route.low_severity_digest} is not an a4_digest route with a period (period: or a _daily/_weekly/_monthly name)`,
          );
      }
      if (route.period !== undefined && route.trust_tier !== "a4_digest")
        problem(at("period"), "only an a4_digest route has a digest period");
      if (route.audience !== "mention-artifact-owner" && route.metadata_fields)
        problem(at("metadata_fields"), "only a mention-artifact-owner route names metadata_fields");
    }
  });

export type NotificationMatrix = z.output<typeof matrixSchema>["matrix"];

export type DigestPeriod = NonNullable<RouteConfig["period"]>;

/** A digest route's period: its `period`, else its name's `_daily` / `_weekly` / `_monthly` suffix. */
export function digestPeriodOf(routeName: string, route: RouteConfig): DigestPeriod | undefined {
  if (route.trust_tier !== "a4_digest") return undefined;
  return route.period ?? (/_(daily|weekly|monthly)$/.exec(routeName)?.[1] as DigestPeriod | undefined);
}

/** Parses and validates a matrix; a problem is a {@link CatalogLoadError} `file:line: field: problem`. */
export function parseNotificationMatrix(file: string, text: string): NotificationMatrix {
  return parseYamlCatalog(file, text, matrixSchema).matrix;
}

/** Reads and validates the matrix file. */
export function loadNotificationMatrix(file: string): NotificationMatrix {
  if (!existsSync(file)) throw new CatalogLoadError(file, 1, "does not exist");
  return parseNotificationMatrix(file, readFileSync(file, "utf8"));
}

/** The route a message without one takes: approvals go to `hil_approval`, digests to their own, the rest to the default. */
export function defaultRouteFor(matrix: NotificationMatrix, category: NotificationCategory): string {
  if (category === "A1" && matrix.routes.hil_approval) return "hil_approval";
  if (category === "A2" && matrix.routes.operational_alert) return "operational_alert";
  return matrix.default_route;
}

/** The start-up refusal of spec §6 item 4 / §8: a non-local runtime without an A2 channel on `operational_alert`. */
export class NotificationRouteUnavailableError extends Error {
  constructor(readonly route: string) {
    super(
      `notification_route_unavailable: no registered channel supporting A2 on ${route}; configure one (e.g. SVC_PAGING_ROUTING_KEY_REF or SVC_WEBHOOK_URL) or change config/notifications-matrix.yaml`,
    );
    this.name = "NotificationRouteUnavailableError";
  }
}

/**
 * Checks that `operational_alert` has a registered channel that carries A2. Non-local: throws
 * {@link NotificationRouteUnavailableError} (the runtime must not start). Local: logs the
 * `notification_route_unavailable` lifecycle record at INFO and returns false; approvals stay
 * fail-closed in the human-approval queue.
 */
export function checkOperationalRoute(
  matrix: NotificationMatrix,
  registered: ReadonlySet<string>,
  options: { local: boolean; log: (message: string, fields: Record<string, unknown>) => void },
): boolean {
  const route = matrix.routes.operational_alert;
  const ok =
    route !== undefined &&
    [route.primary, ...route.fallback].some(
      (id) => registered.has(id) && (matrix.channels[id]?.categories ?? []).includes("A2"),
    );
  if (ok) return true;
  if (!options.local) throw new NotificationRouteUnavailableError("operational_alert");
  options.log("notification_route_unavailable", {
    event: "notification_route_unavailable",
    route: "operational_alert",
    escalation: "fail_closed_human_approval_queue",
  });
  return false;
}
