import type { AuditActor, AuditLog } from "../ops/audit.js";
import type { ChannelDeliveryReceipt, Notifier } from "./types.js";

/** What a test notification reports: the route and each channel's delivery state and receipt. */
export interface TestNotificationResult {
  route: string;
  correlation_id: string;
  state: string;
  confirmed: boolean;
  channels: ChannelDeliveryReceipt[];
}

/**
 * Sends a clearly marked test A2 message through the router to every channel of `route` (the
 * "send a test notification" every paging product offers) and audits who asked. Each test has its
 * own correlation id, so it is never deduplicated against an earlier test.
 */
export async function sendTestNotification(
  deps: { notifier: Notifier; audit: AuditLog },
  request: { route: string; actor: AuditActor; requestId: string; now: Date },
): Promise<TestNotificationResult> {
  const correlation_id = `notify-test/${request.requestId}`;
  const receipt = await deps.notifier.send({
    category: "A2",
    template_key: "notify.test",
    recipient: request.actor.oid,
    title: "[TEST] blastplane test notification",
    body_markdown: `This is a test notification sent at ${request.now.toISOString()} through route ${request.route}. No action is needed.`,
    params: { sent_at: request.now.toISOString(), route: request.route },
    correlation_id,
    idempotency_key: correlation_id,
    route: request.route,
    severity: "info",
    fan_out: "all",
  });
  const result: TestNotificationResult = {
    route: request.route,
    correlation_id,
    state: receipt.state ?? (receipt.confirmed ? "delivered" : "definitive_failure"),
    confirmed: receipt.confirmed,
    channels: receipt.channels ?? [],
  };
  await deps.audit.record({
    actor: request.actor,
    action: "notify.test",
    target: request.route,
    outcome: result.confirmed ? "succeeded" : "failed",
    request_id: request.requestId,
    details: {
      state: result.state,
      channels: result.channels.map((c) => ({
        channel: c.channel,
        state: c.state,
        vendor_message_id: c.vendor_message_id,
      })),
    },
  });
  return result;
}
