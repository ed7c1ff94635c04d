import type { AuditLog } from "../../ops/audit.js";
import type { KillSwitchChange } from "../../ops/kill-switch.js";
import type { Notifier } from "../../notify/types.js";
import type { ApprovalStore } from "./approval-store.js";

/**
 * What happens when the global kill switch flips (spec §8): turned on, every open A1 request is
 * requeued (it stays pending and decidable; its delivery and reminders are held), and the change
 * is announced as an A2 operational alert to every operational recipient, once per flip (keyed
 * by the flip's time), with an audit entry. Turned off, the same announcement says held
 * deliveries resume (each approval orchestration offers its held send again within a minute).
 */
export function createKillSwitchAnnouncer(deps: {
  store: ApprovalStore;
  notifier: Notifier;
  audit: AuditLog;
  recipients: readonly string[];
}) {
  return async (change: KillSwitchChange): Promise<void> => {
    const actor = { oid: change.actor_oid, name: change.actor_oid };
    const requestId = `kill_switch_${change.on ? "on" : "off"}/${change.at}`;
    const open = change.on ? await deps.store.listPending() : [];
    for (const item of open) {
      // The same claim the delivery path takes, so an item is audited as requeued once per activation.
      if (await deps.store.claim(item.approval_id, `requeued-${change.at}`, new Date(change.at))) {
        await deps.audit.record({
          actor,
          action: "console.approval_requeued",
          target: item.approval_id,
          outcome: "succeeded",
          request_id: requestId,
          details: { reason: "kill_switch_on" },
        });
      }
    }
    const body = change.on
      ? `The global kill switch was turned on by ${change.actor_oid} at ${change.at}: no action executes and A1 approval delivery is held. ${open.length} open approval request${open.length === 1 ? " is" : "s are"} requeued and stay decidable.`
      : `The global kill switch was turned off by ${change.actor_oid} at ${change.at}: held approval requests are delivered again.`;
    let announced = 0;
    for (const recipient of deps.recipients) {
      try {
        const receipt = await deps.notifier.send({
          category: "A2",
          template_key: change.on ? "kill_switch.on" : "kill_switch.off",
          recipient,
          title: change.on ? "Kill switch on" : "Kill switch off",
          body_markdown: body,
          correlation_id: requestId,
          idempotency_key: `${requestId}/${recipient}`,
          // Announced on every operational channel (spec §8); a channel that posts to its own
          // audience gets it once per flip, whichever recipient's send reaches it first.
          severity: "high",
          fan_out: "all",
        });
        if (receipt.confirmed) announced++;
      } catch {
        // An unconfirmed announcement is counted below; the switch itself has already flipped.
      }
    }
    await deps.audit.record({
      actor,
      action: change.on ? "console.kill_switch_on" : "console.kill_switch_off",
      target: "kill_switch",
      outcome: "succeeded",
      request_id: requestId,
      details: { requeued: open.map((i) => i.approval_id), announced, recipients: deps.recipients.length },
    });
  };
}
