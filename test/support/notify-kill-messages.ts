import type { Notification } from "../../shared/notify/types.js";

/** The test's message number `i`: one A2 alert to every channel of the route. */
export function killTestMessage(i: number): Notification {
  return {
    category: "A2",
    template_key: "ops.alert",
    recipient: "operational",
    title: `Kill-test alert ${i}`,
    body_markdown: `Alert number ${i} of the kill test.`,
    correlation_id: `kill-${i}`,
    audit_id: `kill-aud-${i}`,
    idempotency_key: `kill/${i}`,
    severity: "high",
    fan_out: "all",
  };
}
