import { z } from "zod";
import {
  ActionInProgressError,
  ActionNotSupportedError,
  ActionParametersError,
  ActionStateChangedError,
} from "../../ops/actions/action-executor.js";
import { activateBreakGlass, BreakGlassDeniedError } from "../break-glass/break-glass.js";
import { RUNBOOKS } from "../runbooks.js";
import type { ConsoleToolDependencies } from "./dependencies.js";
import { boundedText, defineTool, type Tool, ToolError } from "./tool.js";

const runbookArgs = z
  .strictObject({
    name: z.enum(RUNBOOKS.map((r) => r.name) as [string, ...string[]]),
    params: z.record(z.string(), z.unknown()).default({}),
    dry_run: z.union([z.boolean(), z.enum(["true", "false"]).transform((v) => v === "true")]).default(true),
  })
  .transform((args, ctx) => {
    const book = RUNBOOKS.find((r) => r.name === args.name);
    const params = book?.params.safeParse(args.params);
    if (!book || !params?.success) {
      for (const issue of params?.error?.issues ?? [])
        ctx.addIssue({
          code: "custom",
          path: ["params", ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
          message: issue.message,
        });
      return z.NEVER;
    }
    return { name: args.name, dry_run: args.dry_run, params: params.data, action: book.action(params.data) };
  });

/** run_runbook and activate_break_glass. */
export function actionTools(deps: ConsoleToolDependencies): Tool[] {
  return [
    defineTool<z.output<typeof runbookArgs>>({
      descriptor: {
        name: "run_runbook",
        description:
          "Runs one runbook over an action type: a dry run reports the verifier's verdict, a real run executes an eligible action.",
        argument_hint: `run_runbook name=${RUNBOOKS.map((r) => r.name).join("|")} params={…} dry_run=true|false`,
        rbac_floor: "Contributor",
        side_effect_class: "execute",
        failure_modes: [
          "invalid_arguments",
          "forbidden",
          "verifier_denied",
          "verifier_abstained",
          "not_supported",
          "conflict",
        ],
      },
      args: runbookArgs,
      floorFor: (args) => (args.dry_run ? "Contributor" : "Owner"),
      proposedAction: (args) => (args.dry_run ? undefined : args.action),
      async run(args, context) {
        const report = await deps.verify(args.action);
        if (args.dry_run)
          return {
            data: { runbook: args.name, dry_run: true, action: args.action, verifier_report: report },
            evidence_ref: `verifier:${args.action.action_type}@${report.checked_at}`,
          };
        // The coordinator re-checked the verifier before calling; this is the gate's second half.
        if (report.verdict !== "eligible")
          throw new ToolError(
            report.verdict === "abstain" ? "verifier_abstained" : "verifier_denied",
            `the verifier ${report.verdict === "abstain" ? "abstains" : "denies"}; nothing was executed`,
            { missing_evidence: report.missing_evidence },
          );
        const result = await deps.executor
          .execute(args.action, {
            idempotencyKey: `runbook/${context.requestId}`,
            actor: { oid: context.caller.oid, name: context.caller.name },
            requestId: context.requestId,
          })
          .catch((error: unknown) => {
            if (error instanceof ActionNotSupportedError) throw new ToolError("not_supported", error.message);
            // The executor re-read the target and it changed since the verifier's check: nothing was done.
            if (error instanceof ActionStateChangedError)
              throw new ToolError("conflict", error.message, { observed: error.observed });
            if (error instanceof ActionInProgressError) throw new ToolError("conflict", error.message);
            if (error instanceof ActionParametersError) throw new ToolError("invalid_arguments", error.message);
            throw error;
          });
        return {
          data: { runbook: args.name, dry_run: false, action: args.action, verifier_report: report, result },
          evidence_ref: `verifier:${args.action.action_type}@${report.checked_at}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "activate_break_glass",
        description:
          "Validates the reason and expiry, pages every configured Owner and records the audit trail, changing no principal or role.",
        argument_hint: "activate_break_glass reason=<text> [expiry=<seconds, at most 14400>]",
        rbac_floor: "Reader",
        side_effect_class: "breakglass",
        failure_modes: ["invalid_arguments", "forbidden"],
      },
      args: z.strictObject({
        reason: boundedText(1000).pipe(z.string().trim().min(10, "give a reason of at least 10 characters")),
        expiry: z.coerce.number().int().min(60).max(deps.breakGlass.max_ttl_seconds).optional(),
      }),
      async run(args, context) {
        try {
          const result = await activateBreakGlass(
            { config: deps.breakGlass, notifier: deps.notifier, audit: deps.audit },
            {
              actor: { oid: context.caller.oid, name: context.caller.name },
              reason: args.reason,
              expirySeconds: args.expiry,
              requestId: context.requestId,
              now: context.now(),
            },
          );
          return { data: result, evidence_ref: `audit:${result.audit_id}` };
        } catch (error) {
          if (error instanceof BreakGlassDeniedError)
            throw new ToolError("forbidden", "break-glass denied: no Owner page was confirmed", {
              reason: error.reason,
              audit_id: error.audit_id,
            });
          throw error;
        }
      },
    }),
  ];
}
