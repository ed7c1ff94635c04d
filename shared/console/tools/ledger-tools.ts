import { z } from "zod";
import type { ConsoleToolDependencies } from "./dependencies.js";
import type { DeploymentHistoryProvider, DeploymentRecord } from "../providers/providers.js";
import { defineTool, type Tool, ToolError } from "./tool.js";

/** The ledgers' cap (spec §8): at most 500 records are listed; aggregate counts stay exact. */
export const LEDGER_LIST_CAP = 500;
const DAY_MS = 86_400_000;

/** query_llm_usage and query_deployments: reads of ledgers the core keeps. */
export function ledgerTools(deps: ConsoleToolDependencies): Tool[] {
  return [
    defineTool({
      descriptor: {
        name: "query_llm_usage",
        description:
          "Reports measured language-model token usage over 1 to 90 days, grouped by day, model, workload scope or mode.",
        argument_hint:
          "query_llm_usage group_by=day|model|workload_scope|mode lookback_days=1..90 [usage_scope=all|operator_chat]",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments"],
      },
      args: z.strictObject({
        group_by: z.enum(["day", "model", "workload_scope", "mode"]).default("day"),
        lookback_days: z.coerce.number().int().min(1).max(90).default(7),
        usage_scope: z.enum(["all", "operator_chat"]).default("all"),
      }),
      async run(args, context) {
        const since = new Date(context.now().getTime() - args.lookback_days * DAY_MS);
        // Read everything in the window so the sums are exact; only the listing is capped.
        const records = (await deps.usage.list(since, 100_000)).filter(
          (r) => args.usage_scope === "all" || r.workload_scope === "operator_chat",
        );
        const groups = new Map<string, { key: string; calls: number; input_tokens: number; output_tokens: number }>();
        for (const r of records) {
          const key = args.group_by === "day" ? r.at.slice(0, 10) : r[args.group_by];
          const g = groups.get(key) ?? { key, calls: 0, input_tokens: 0, output_tokens: 0 };
          g.calls++;
          g.input_tokens += r.input_tokens;
          g.output_tokens += r.output_tokens;
          groups.set(key, g);
        }
        return {
          data: {
            group_by: args.group_by,
            lookback_days: args.lookback_days,
            usage_scope: args.usage_scope,
            since: since.toISOString(),
            total_calls: records.length,
            groups: [...groups.values()].sort((a, b) => a.key.localeCompare(b.key)),
            records: records.slice(0, LEDGER_LIST_CAP),
            // No measured price basis is recorded, so no money amount is stated.
            cost: { status: "not_stated", reason: "no measured price basis" },
          },
          evidence_ref: `usage:${since.toISOString()}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "query_deployments",
        description:
          "Combines Git deployment history, the resource group's cloud deployments and the deployments the control plane recorded in a window, newest first, with each missing source reported.",
        argument_hint: "query_deployments window=<1..720>h",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments"],
      },
      args: z.strictObject({
        window: z
          .string()
          .regex(/^\d{1,3}h$/, "window looks like 24h")
          .default("168h")
          .pipe(
            z
              .string()
              .refine((w) => Number.parseInt(w, 10) >= 1 && Number.parseInt(w, 10) <= 720, "window is 1h to 720h"),
          ),
      }),
      async run({ window }, context) {
        const until = context.now();
        const since = new Date(until.getTime() - Number.parseInt(window, 10) * 3_600_000);
        const recorded: DeploymentRecord[] = (await deps.events.list({ since, limit: 1000 }))
          .filter((e) => e.event_type.startsWith("deployment."))
          .map((e) => ({
            at: new Date(e.detected_at).toISOString(),
            source: "control_plane",
            kind: e.event_type,
            name: e.resource_ref,
            detail: { event_id: e.event_id, reported_by: e.source },
          }));
        const sources: Record<string, { status: "ok" | "unavailable"; count: number; truncated: boolean }> = {
          control_plane: { status: "ok", count: recorded.length, truncated: recorded.length >= 1000 },
        };
        const coverage_gaps: string[] = [];
        const histories: [string, DeploymentHistoryProvider | undefined, string][] = [
          ["git", deps.providers.gitDeployments, "no deployment repository is configured (SVC_DEPLOYMENTS_GIT_DIR)"],
          [
            "cloud",
            deps.providers.cloudDeployments,
            "no resource group is configured (SVC_SUBSCRIPTION_ID with SVC_DEPLOYMENTS_RESOURCE_GROUP)",
          ],
        ];
        const read = await Promise.all(
          histories.map(
            async ([name, provider, notConfigured]): Promise<{
              records: DeploymentRecord[];
              truncated: boolean;
              gap?: string;
            }> => {
              if (!provider) return { records: [], truncated: false, gap: `${name}: ${notConfigured}` };
              try {
                return await provider.list({ start: since, end: until }, LEDGER_LIST_CAP);
              } catch (error) {
                // One source failing leaves the others' history, and the gap is named rather than hidden.
                return {
                  records: [],
                  truncated: false,
                  gap: `${name}: ${error instanceof ToolError ? error.message : "the source could not be read"}`,
                };
              }
            },
          ),
        );
        const fromProviders = read.map(({ records, truncated, gap }, n) => {
          const name = histories[n]?.[0] ?? "";
          sources[name] = { status: gap ? "unavailable" : "ok", count: records.length, truncated };
          if (gap) coverage_gaps.push(gap);
          return records;
        });
        const deployments = [...recorded, ...fromProviders.flat()].sort(
          (a, b) => b.at.localeCompare(a.at) || a.source.localeCompare(b.source),
        );
        return {
          data: {
            window,
            since: since.toISOString(),
            until: until.toISOString(),
            total: deployments.length,
            truncated: deployments.length > LEDGER_LIST_CAP || Object.values(sources).some((s) => s.truncated),
            sources,
            coverage_gaps,
            deployments: deployments.slice(0, LEDGER_LIST_CAP),
          },
          evidence_ref: `deployments:${since.toISOString()}/${until.toISOString()}`,
        };
      },
    }),
  ];
}
