import { createHash } from "node:crypto";
import type { TableClient } from "@azure/data-tables";
import type { TableSource } from "../../storage/table-source.js";
import { tableOpener } from "../../storage/table-source.js";
import { isStatus, packText, unpackText } from "../../storage/table-text.js";
import { type DigestPeriod, defaultRouteFor, digestPeriodOf, type NotificationMatrix } from "../matrix.js";
import type { DeliveryReceipt, Notification, Notifier } from "../types.js";
import { type BriefingInput, briefingMarkdown, composeBriefing, type DigestNotice, type Severity } from "./briefing.js";

/**
 * Digests (A4, spec operator-console.md §6 item 6): the matrix's `digest_*` routes. A notice meant
 * for a digest is batched (table `notifydigests`, deduplicated by its idempotency key) into the
 * route's current period — a UTC day, an ISO week from Monday, a calendar month — instead of going
 * out on its own. The digest timer (`notificationDigestTimer`, hourly) flushes each period that
 * has ended: the briefing composer summarises its notices and whatever the route's source gives
 * (incident tally, action outcomes, cost, guard breaches), and one A4 message goes through the
 * router — or nothing, when the period had no significant activity. The message's idempotency key
 * is the route and period, so a second flush, another host or a restart sends nothing twice.
 */

export const DIGEST_TABLE = "notifydigests";

/** The spec's digests (§6 item 6) by route name; any other digest route is titled from its name. */
export const DIGEST_TITLES: Readonly<Record<string, string>> = {
  digest_shadow_accuracy_daily: "Daily shadow-accuracy report",
  digest_override_retro_weekly: "Weekly override retrospective",
  digest_enforce_promotion_weekly: "Weekly enforce-promotion candidates",
  digest_governance_pr_aging_weekly: "Weekly governance PR aging",
  digest_exemption_expiry_weekly: "Weekly exemption-expiry lookahead",
  digest_kpi_cost_monthly: "Monthly KPI and cost wrap-up",
  digest_break_glass_usage: "Break-glass usage summary",
};

const DAY_MS = 86_400_000;

/** The period of `period` kind that holds `at`: `[start, end)`, UTC. */
export function periodAt(period: DigestPeriod, at: Date): { start: Date; end: Date } {
  const day = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate());
  if (period === "daily") return { start: new Date(day), end: new Date(day + DAY_MS) };
  if (period === "weekly") {
    const start = day - ((at.getUTCDay() + 6) % 7) * DAY_MS;
    return { start: new Date(start), end: new Date(start + 7 * DAY_MS) };
  }
  return {
    start: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1)),
    end: new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1)),
  };
}

/** A notice for a digest route. */
export interface DigestNoticeInput {
  route: string;
  severity: Severity;
  template_key: string;
  title: string;
  correlation_id: string;
  /** Deduplicates the notice within its period (an emitter's replay adds nothing). */
  idempotency_key: string;
}

/** What a digest route's source adds to its briefing for a period (real counts only: omit what is unknown). */
export type DigestSource = (period: {
  from: Date;
  to: Date;
}) => Promise<Omit<BriefingInput, "title" | "period" | "notices">>;

export interface DigestFlushResult {
  route: string;
  period_start: string;
  outcome: "sent" | "suppressed";
  receipt?: DeliveryReceipt;
}

export interface DigestDependencies {
  tables: TableSource;
  matrix: NotificationMatrix;
  notifier: Notifier;
  /** Sources by route: a route with one is flushed every period, notices or not. */
  sources?: Readonly<Record<string, DigestSource>>;
  /**
   * Who a `role-dm` digest route (the break-glass usage summary) reaches: one direct message each
   * (the configured break-glass Owners). With none, such a digest is suppressed.
   */
  directRecipients?: readonly string[];
  now?: () => Date;
  log?: (message: string, fields: Record<string, unknown>) => void;
}

const hash = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 40);
const OPEN = "open";
const DONE = "done";
const periodKey = (route: string, start: Date) => `${route}|${start.toISOString()}`;

export function createDigests(deps: DigestDependencies) {
  const now = deps.now ?? (() => new Date());
  const table = tableOpener(deps.tables, DIGEST_TABLE);
  const periodOfRoute = (route: string) => {
    const config = deps.matrix.routes[route];
    return config ? digestPeriodOf(route, config) : undefined;
  };
  const digestRoutes = () =>
    Object.keys(deps.matrix.routes).flatMap((r) => {
      const period = periodOfRoute(r);
      return period ? [[r, period] as const] : [];
    });
  const exists = async (t: TableClient, partition: string, row: string) => {
    try {
      await t.getEntity(partition, row);
      return true;
    } catch (error) {
      if (isStatus(error, 404)) return false;
      throw error;
    }
  };

  async function flushOne(t: TableClient, route: string, start: Date, end: Date): Promise<DigestFlushResult> {
    const key = periodKey(route, start);
    const notices: DigestNotice[] = [];
    for await (const e of t.listEntities<Record<string, unknown>>({
      queryOptions: { filter: `PartitionKey eq 'p|${key}'` },
    }))
      notices.push(JSON.parse(unpackText(e, "doc")) as DigestNotice);
    const source = deps.sources?.[route];
    const extra = source ? await source({ from: start, to: end }) : {};
    const briefing = composeBriefing({
      title: DIGEST_TITLES[route] ?? route.replace(/^digest_/, "").replace(/_/g, " "),
      period: { from: start.toISOString(), to: end.toISOString() },
      ...extra,
      ...(notices.length > 0 ? { notices } : {}),
    });
    let result: DigestFlushResult = { route, period_start: start.toISOString(), outcome: "suppressed" };
    const direct = deps.matrix.routes[route]?.audience === "role-dm";
    const recipients = direct ? [...new Set(deps.directRecipients ?? [])] : ["operational"];
    if (briefing.has_significant_activity && recipients.length > 0) {
      const id = `digest/${route}/${start.toISOString()}`;
      let receipt: DeliveryReceipt | undefined;
      for (const recipient of recipients) {
        const sent = await deps.notifier.send({
          category: "A4",
          route,
          template_key: `digest.${route}`,
          recipient,
          title: briefing.headline,
          body_markdown: briefingMarkdown(briefing),
          correlation_id: id,
          audit_id: id,
          idempotency_key: direct ? `${id}/${recipient}` : id,
        });
        if (!receipt || (sent.confirmed && !receipt.confirmed)) receipt = sent;
      }
      result = { ...result, outcome: "sent", ...(receipt ? { receipt } : {}) };
    } else
      deps.log?.(
        briefing.has_significant_activity
          ? "digest suppressed: a role-dm digest with no recipients"
          : "digest suppressed: no significant activity",
        { route, period_start: start.toISOString() },
      );
    await t
      .createEntity({ partitionKey: DONE, rowKey: key, outcome: result.outcome, at: now().toISOString() })
      .catch((error: unknown) => {
        if (!isStatus(error, 409)) throw error;
      });
    await t.deleteEntity(OPEN, key).catch((error: unknown) => {
      if (!isStatus(error, 404)) throw error;
    });
    return result;
  }

  return {
    /** Batches a notice into its route's current period; `duplicate` when it was batched before. */
    async add(notice: DigestNoticeInput): Promise<"batched" | "duplicate"> {
      const period = periodOfRoute(notice.route);
      if (!period) throw new RangeError(`route ${notice.route} is not a digest route with a period`);
      const at = now();
      const { start, end } = periodAt(period, at);
      const key = periodKey(notice.route, start);
      const t = await table();
      const doc: DigestNotice = {
        severity: notice.severity,
        template_key: notice.template_key,
        title: notice.title.slice(0, 300),
        correlation_id: notice.correlation_id,
        at: at.toISOString(),
      };
      try {
        await t.createEntity({
          partitionKey: `p|${key}`,
          rowKey: hash(notice.idempotency_key),
          ...packText("doc", JSON.stringify(doc)),
        });
      } catch (error) {
        if (isStatus(error, 409)) return "duplicate";
        throw error;
      }
      await t.upsertEntity(
        { partitionKey: OPEN, rowKey: key, route: notice.route, start: start.toISOString(), end: end.toISOString() },
        "Merge",
      );
      return "batched";
    },

    /**
     * Sends (or suppresses) the digest of every period that has ended: periods holding notices,
     * and for routes with a source the period that ended last. Idempotent.
     */
    async flush(): Promise<DigestFlushResult[]> {
      const at = now();
      const t = await table();
      const due = new Map<string, { route: string; start: Date; end: Date }>();
      for await (const e of t.listEntities<{ route: string; start: string; end: string }>({
        queryOptions: { filter: `PartitionKey eq '${OPEN}'` },
      }))
        if (Date.parse(e.end) <= at.getTime())
          due.set(e.rowKey as string, { route: e.route, start: new Date(e.start), end: new Date(e.end) });
      for (const [route, period] of digestRoutes()) {
        if (!deps.sources?.[route]) continue;
        const last = periodAt(period, new Date(periodAt(period, at).start.getTime() - 1));
        due.set(periodKey(route, last.start), { route, ...last });
      }
      const results: DigestFlushResult[] = [];
      for (const [key, { route, start, end }] of [...due].sort(([a], [b]) => a.localeCompare(b))) {
        if (await exists(t, DONE, key)) {
          await t.deleteEntity(OPEN, key).catch(() => undefined);
          continue;
        }
        if (!periodOfRoute(route)) continue;
        results.push(await flushOne(t, route, start, end));
      }
      return results;
    },
  };
}

export type Digests = ReturnType<typeof createDigests>;

/**
 * The notifier with low-severity batching: a message that {@link mayBatch} whose route names a
 * `low_severity_digest` is batched into that digest (its receipt says so: not
 * confirmed, channel `digest:<route>`); every other message goes to `notifier` unchanged.
 */
/** Severities a notice may have and still wait for a digest: anything above is sent at once. */
export const BATCHABLE_SEVERITIES: readonly Severity[] = ["low", "info"];

/**
 * Whether `message` may wait for its route's low-severity digest instead of going out now: the
 * emitter marked it `batchable`, it is an A2 notice of severity low or info, and it is not a
 * fan-out to every channel (a break-glass page, the kill switch's announcement). A1 requests,
 * digests themselves and anything of severity medium and above are always sent at once, whatever
 * the emitter says (docs/notifications.md "What may wait for a digest").
 */
export function mayBatch(message: Notification): boolean {
  return (
    message.batchable === true &&
    message.category === "A2" &&
    message.fan_out !== "all" &&
    message.severity !== undefined &&
    BATCHABLE_SEVERITIES.includes(message.severity)
  );
}

export function withLowSeverityDigests<N extends Notifier>(
  notifier: N,
  digests: Digests,
  matrix: NotificationMatrix,
  now: () => Date = () => new Date(),
): N {
  const send = async (message: Notification): Promise<DeliveryReceipt> => {
    const route = matrix.routes[message.route ?? defaultRouteFor(matrix, message.category)];
    const digest = route?.low_severity_digest;
    if (!digest || !mayBatch(message) || !message.severity) return notifier.send(message);
    await digests.add({
      route: digest,
      severity: message.severity,
      template_key: message.template_key,
      title: message.title,
      correlation_id: message.correlation_id,
      idempotency_key: message.idempotency_key,
    });
    return { delivery_id: `digest:${digest}`, confirmed: false, channel: `digest:${digest}`, at: now().toISOString() };
  };
  return Object.assign(Object.create(Object.getPrototypeOf(notifier)) as N, notifier, { send });
}
