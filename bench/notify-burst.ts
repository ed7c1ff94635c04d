/**
 * Bench (h), issue 25: a burst of A2 events through the notification router to local vendor
 * servers. `events` alerts (default 1,000) over `correlations` correlation ids (default 200) — each
 * id's events are the same alert raised again (same correlation and audit id, as a replayed or
 * re-detected alert is) — are all sent at once, in a seeded shuffled order, through the router
 * (Table storage deliveries on a fresh in-memory Azurite) on the route `operational_alert`:
 * PagerDuty Events v2 over HTTPS first, a Standard Webhooks receiver as its fallback. Reports the
 * messages the vendors received (every correlation id, none twice on one vendor; an id on both
 * vendors is the router's fallback after an ambiguous page, counted apart),
 * p50 / p99 from an alert's first event to the vendor receiving it, and the process CPU per event
 * (the router, its storage client and the in-process vendor servers together: an upper bound of
 * the router's own). Bundled and run by bench/run.mjs (`BENCH_ONLY=h`).
 */
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { startAzurite } from "../local/azurite.js";
import { createLogger } from "../shared/logging/logger.js";
import { createPagingChannel } from "../shared/notify/channels/paging.js";
import { createWebhookChannel } from "../shared/notify/channels/webhook.js";
import { createDeliveryStore } from "../shared/notify/delivery-store.js";
import { parseNotificationMatrix } from "../shared/notify/matrix.js";
import { type ChannelAdapter, createNotificationRouter } from "../shared/notify/router.js";
import type { Notification } from "../shared/notify/types.js";
import { createAuditLog } from "../shared/ops/audit.js";
import { startPagingFake, startWebhookReceiver, testCertificate } from "../test/support/notify-vendors.js";

const MATRIX = `matrix:
  version: 1
  default_route: operational_alert
  channels:
    pager: { kind: paging, categories: [A2], runbook_url: https://runbooks.example/ops }
    hook: { kind: webhook, categories: [A2] }
  routes:
    operational_alert: { trust_tier: a2_operational_alert, primary: pager, fallback: [hook] }
`;
const WEBHOOK_SECRET = `whsec_${Buffer.from("bench-webhook-secret-of-32-bytes!").toString("base64")}`;

export interface NotifyBurstResult {
  events: number;
  correlation_ids: number;
  /** Distinct correlation ids some vendor received. */
  delivered: number;
  /** Requests the vendors received in all. */
  vendor_requests: number;
  /** Correlation ids one vendor received more than once: a message sent twice. */
  duplicates_same_vendor: number;
  /**
   * Correlation ids both vendors received: the pager's attempt was ambiguous (timed out with the
   * page possibly shown) and the router tried the next channel, as it does (docs/notifications.md).
   */
  fallback_after_ambiguous: number;
  /** From an alert's first event to the vendor receiving it, ms. */
  p50_ms: number;
  p99_ms: number;
  burst_ms: number;
  cpu_ms_per_event: number;
  cpu_ms_per_delivered: number;
  confirmed_receipts: number;
  pass: boolean;
}

function seeded(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : (s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number);
};
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

export async function runNotifyBurst(options: {
  root: string;
  events?: number;
  correlations?: number;
  log?: (line: string) => void;
}): Promise<NotifyBurstResult> {
  const events = options.events ?? 1000;
  const correlations = options.correlations ?? 200;
  const log = options.log ?? (() => undefined);
  const tls = testCertificate();
  const azurite = await startAzurite({
    blobPort: 0,
    queuePort: 0,
    tablePort: 0,
    logger: createLogger({ level: "error" }),
    watchdogPath: path.join(options.root, "local/parent-watchdog.cjs"),
    startTimeoutMs: 120_000,
  });
  const [pager, hook] = await Promise.all([startPagingFake(tls), startWebhookReceiver()]);
  try {
    const tables = (name: string) =>
      TableClient.fromConnectionString(azurite.connectionString, `bench${name}`, { allowInsecureConnection: true });
    const adapters = new Map<string, ChannelAdapter>([
      [
        "pager",
        createPagingChannel({
          eventsUrl: `${pager.url}/v2/enqueue`,
          routingKey: "R0123456789ABCDEF0123456789ABCDE",
          defaultRunbookUrl: "https://runbooks.example/ops",
          ca: tls.cert,
        }),
      ],
      ["hook", createWebhookChannel({ url: `${hook.url}/in`, secret: WEBHOOK_SECRET })],
    ]);
    const router = createNotificationRouter({
      matrix: parseNotificationMatrix("bench.yaml", MATRIX),
      channels: adapters,
      deliveries: createDeliveryStore(tables),
      audit: createAuditLog(tables),
    });
    // Warm the tables and the connections once, outside the measurement.
    await router.send(alert("warm-up", 0));

    const firstEventAt = new Map<string, number>();
    const receivedAt = new Map<string, { vendor: string; at: number }[]>();
    const arrival = (vendor: string, id: string | undefined) => {
      if (!id || id === "warm-up") return;
      receivedAt.set(id, [...(receivedAt.get(id) ?? []), { vendor, at: performance.now() }]);
    };
    pager.onRequest = (r) => arrival("pager", (JSON.parse(r.body) as { dedup_key?: string }).dedup_key);
    hook.onRequest = (r) =>
      arrival("hook", (JSON.parse(r.body) as { data?: { correlation_id?: string } }).data?.correlation_id);

    const random = seeded(20261128);
    const order = Array.from({ length: events }, (_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [order[i], order[j]] = [order[j] as number, order[i] as number];
    }
    log(`(h) ${events} A2 events over ${correlations} correlation ids through the router`);
    const cpu = process.cpuUsage();
    const started = performance.now();
    const receipts = await Promise.all(
      order.map(async (i) => {
        const id = `corr-${String(i % correlations).padStart(4, "0")}`;
        if (!firstEventAt.has(id)) firstEventAt.set(id, performance.now());
        return router.send(alert(id, i));
      }),
    );
    const burstMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    const cpuMs = (used.user + used.system) / 1000;
    const latencies = [...receivedAt].map(
      ([id, got]) => Math.min(...got.map((g) => g.at)) - (firstEventAt.get(id) ?? 0),
    );
    const vendorRequests = [...receivedAt.values()].reduce((n, t) => n + t.length, 0);
    const delivered = receivedAt.size;
    const vendorsOf = (got: { vendor: string }[]) => new Set(got.map((g) => g.vendor)).size;
    const twice = [...receivedAt.values()].filter((got) => vendorsOf(got) < got.length).length;
    const both = [...receivedAt.values()].filter((got) => vendorsOf(got) > 1).length;
    const result: NotifyBurstResult = {
      events,
      correlation_ids: correlations,
      delivered,
      vendor_requests: vendorRequests,
      duplicates_same_vendor: twice,
      fallback_after_ambiguous: both,
      p50_ms: round(quantile(latencies, 0.5)),
      p99_ms: round(quantile(latencies, 0.99)),
      burst_ms: round(burstMs),
      cpu_ms_per_event: round(cpuMs / events, 2),
      cpu_ms_per_delivered: round(cpuMs / Math.max(1, delivered), 2),
      confirmed_receipts: receipts.filter((r) => r.confirmed).length,
      pass: delivered === correlations && twice === 0,
    };
    log(
      `  delivered ${delivered}/${correlations} (vendor requests ${vendorRequests}: ${twice} twice on one vendor, ${both} also on the fallback after an ambiguous page), p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms, CPU ${result.cpu_ms_per_event} ms/event`,
    );
    return result;
  } finally {
    await Promise.all([pager.close(), hook.close()]);
    await azurite.stop();
  }
}

function alert(correlation: string, n: number): Notification {
  return {
    category: "A2",
    template_key: "ops.alert",
    recipient: "operational",
    title: `Queue saturated (${correlation})`,
    body_markdown: "The BLAST admission queue answered 429 for 10 minutes.",
    correlation_id: correlation,
    // The same alert raised again carries the same audit id: the router's idempotency key.
    audit_id: `aud-${correlation}`,
    idempotency_key: `bench/${correlation}/${n}`,
    severity: "high",
  };
}
