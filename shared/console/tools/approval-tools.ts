import { z } from "zod";
import { type ApprovalItem, approvalIdSchema } from "../approvals/approval-store.js";
import type { ConsoleToolDependencies } from "./dependencies.js";

/** A pending approval as `list_hil` and `GET /api/approvals` show it to those who may see its content. */
export function pendingApprovalView(i: ApprovalItem) {
  return {
    approval_id: i.approval_id,
    target: i.action.target,
    proposed_action: i.action.action_type,
    params: i.action.params,
    action_hash: i.action_hash,
    requester: i.requester,
    reason: i.reason,
    severity: i.severity,
    created_at: i.created_at,
    expires_at: i.expires_at,
  };
}

import { boundedText, defineTool, type Tool } from "./tool.js";

/** What a decision answers (`approve_hil` and `POST /api/approvals/{id}/decision`): the outcome and the item's state after it. */
export function decisionView(result: { outcome: string; item: ApprovalItem }) {
  const i = result.item;
  return {
    outcome: result.outcome,
    approval_id: i.approval_id,
    state: i.state,
    decision: i.decision ?? null,
    execution: i.execution ?? null,
    timed_out_at: i.timed_out_at ?? null,
  };
}

/** list_hil and approve_hil over the durable approval queue. */
export function approvalTools(deps: ConsoleToolDependencies): Tool[] {
  return [
    defineTool({
      descriptor: {
        name: "list_hil",
        description: "Lists the queued human approvals with their target, proposed action and requester.",
        argument_hint: "list_hil",
        rbac_floor: "Approver",
        side_effect_class: "read",
        failure_modes: [],
      },
      args: z.strictObject({}),
      async run() {
        const items = await deps.approvalStore.listPending();
        return {
          data: {
            count: items.length,
            items: items.map(pendingApprovalView),
          },
          evidence_ref: `approvals:${items.map((i) => i.approval_id).join(",") || "none"}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "approve_hil",
        description: "Resolves one queued human approval after re-checking the verifier and refusing self-approval.",
        argument_hint:
          "approve_hil approval_id=apr_<24 hex> decision=approve|reject justification=<text> [action_hash=<sha256>]",
        rbac_floor: "Approver",
        side_effect_class: "approve",
        failure_modes: [
          "invalid_arguments",
          "not_found",
          "reauthentication_required",
          "self_approval",
          "forbidden",
          "conflict",
          "verifier_abstained",
          "verifier_denied",
        ],
      },
      args: z.strictObject({
        approval_id: approvalIdSchema,
        decision: z.enum(["approve", "reject"]),
        justification: boundedText(500).pipe(z.string().trim().min(3, "give a short justification")),
        action_hash: z
          .string()
          .regex(/^[0-9a-f]{64}$/)
          .optional(),
      }),
      async run(args, context) {
        const result = await deps.approvals.decide({
          approvalId: args.approval_id,
          actor: { oid: context.caller.oid, name: context.caller.name },
          role: context.role,
          decision: args.decision,
          justification: args.justification,
          actionHash: args.action_hash,
          requestId: context.requestId,
          now: context.now(),
          // A bearer caller's sign-in must be recent; a channel caller (undefined) keeps its channel's A1 trust.
          ...(context.caller.auth_time !== undefined ? { authTime: context.caller.auth_time } : {}),
        });
        return {
          data: decisionView(result),
          evidence_ref: `approval:${result.item.approval_id}`,
        };
      },
    }),
  ];
}
