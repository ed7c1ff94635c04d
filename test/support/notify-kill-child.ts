/**
 * A notifying host for the kill test (test/integration/notify-channels.test.ts): the durable
 * notifier over the real router, the webhook and paging adapters and Table storage on the test's
 * Azurite. On start it drains what a killed predecessor left behind, then sends messages
 * `from`..`count - 1` in order, one line of JSON on stdout per step. Bundled by the test; killed
 * with SIGKILL at random points.
 */
import { TableClient } from "@azure/data-tables";
import { createPagingChannel } from "../../shared/notify/channels/paging.js";
import { createWebhookChannel } from "../../shared/notify/channels/webhook.js";
import { createDeliveryStore } from "../../shared/notify/delivery-store.js";
import { parseNotificationMatrix } from "../../shared/notify/matrix.js";
import { createDurableNotifier } from "../../shared/notify/notify-queue.js";
import { createNotificationRouter } from "../../shared/notify/router.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { killTestMessage } from "./notify-kill-messages.js";

export interface KillChildConfig {
  connectionString: string;
  tablePrefix: string;
  matrix: string;
  webhookUrl: string;
  webhookSecret: string;
  pagingUrl: string;
  routingKey: string;
  ca: string;
  from: number;
  count: number;
}

async function main() {
  const config = JSON.parse(process.env.NOTIFY_KILL_CHILD ?? "{}") as KillChildConfig;
  const tables = (name: string) =>
    TableClient.fromConnectionString(config.connectionString, `${config.tablePrefix}${name}`, {
      allowInsecureConnection: true,
    });
  const matrix = parseNotificationMatrix("kill-matrix.yaml", config.matrix);
  const router = createNotificationRouter({
    matrix,
    channels: new Map([
      ["hook", createWebhookChannel({ url: config.webhookUrl, secret: config.webhookSecret })],
      [
        "pager",
        createPagingChannel({
          eventsUrl: config.pagingUrl,
          routingKey: config.routingKey,
          defaultRunbookUrl: "https://runbooks.example/ops",
          ca: config.ca,
        }),
      ],
    ]),
    deliveries: createDeliveryStore(tables),
    audit: createAuditLog(tables),
  });
  // One host at a time: a restarted host takes over its predecessor's claims at once.
  const notifier = createDurableNotifier({ router, tables, matrix, leaseMs: 0 });
  const say = (line: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(line)}\n`);
  say({ step: "started" });
  say({ step: "drained", closed: await notifier.drain() });
  for (let i = config.from; i < config.count; i++) {
    const receipt = await notifier.send(killTestMessage(i));
    say({ step: "sent", i, state: receipt.state });
  }
  say({ step: "done" });
}

await main();
