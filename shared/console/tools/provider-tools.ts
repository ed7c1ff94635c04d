import { z } from "zod";
import { scanSecrets } from "../../ops/secret-scanner.js";
import type { SnapshotProvider } from "../providers/providers.js";
import type { ConsoleToolDependencies } from "./dependencies.js";
import { boundedText, defineTool, requireProvider, type Tool, ToolError } from "./tool.js";

/** Query rule 9 and §8: log windows and health history are at most 24 hours. */
export const MAX_QUERY_WINDOW_MS = 24 * 3_600_000;

/**
 * Parses an explicit window in English or Korean minutes or hours ("30m", "30 minutes",
 * "last 2 hours", "30분", "2시간") and clamps it to 24 hours. Undefined when none is given.
 */
export function parseWindowMs(text: string | undefined): { ms: number; clamped: boolean } | undefined {
  if (!text) return undefined;
  const match = /(\d{1,5})\s*(m|min|mins|minute|minutes|분|h|hr|hrs|hour|hours|시간|d|day|days|일)(?![a-z])/i.exec(
    text.normalize("NFKC"),
  );
  if (!match) return undefined;
  const n = Number(match[1]);
  const unit = (match[2] ?? "").toLowerCase();
  const ms = /^(m|min|mins|minute|minutes|분)$/.test(unit)
    ? n * 60_000
    : /^(h|hr|hrs|hour|hours|시간)$/.test(unit)
      ? n * 3_600_000
      : n * 86_400_000;
  return ms > MAX_QUERY_WINDOW_MS ? { ms: MAX_QUERY_WINDOW_MS, clamped: true } : { ms, clamped: false };
}

/** Server-owned query templates (query rule 9); prompt text never becomes query text. */
export const LOG_TEMPLATES = {
  failed_requests:
    "requests | where success == false | summarize count() by operation_Name, resultCode | order by count_ desc",
  error_signature_range:
    "union exceptions, traces | where problemId == signature | summarize first=min(timestamp), last=max(timestamp), count()",
  related_logs:
    "union traces, exceptions, requests | where operation_Id == selected_operation | order by timestamp asc | take 200",
  error_sample: "union exceptions, traces, requests | where severityLevel >= 3 or success == false | take 20",
  slowest_traces: "requests | top 20 by duration desc | project timestamp, operation_Name, duration, resultCode",
  dependency_latency: "dependencies | summarize avg(duration), percentile(duration, 95), count() by target, type",
  slow_database_calls:
    "dependencies | where type in ('SQL', 'Azure table', 'Azure blob') | top 20 by duration desc | project timestamp, target, name, duration",
} as const;
export type LogTemplate = keyof typeof LOG_TEMPLATES;

/** Removes secrets, bearer values, resource ids, GUIDs, e-mail addresses, URLs and IP addresses from one cell. */
export function redactLogCell(value: unknown): unknown {
  if (typeof value !== "string") return value;
  // The one secret scanner first; what follows removes what identifies rather than authenticates.
  return scanSecrets(value)
    .text.replace(/\bbearer[\s:=]+[^\s,;]+/gi, "[bearer]")
    .replace(
      /\b(password|pwd|secret|token|api[_-]?key|accountkey|sig|sharedaccesskey)\s*[:=]\s*[^\s,;&]+/gi,
      "$1=[secret]",
    )
    .replace(/\/subscriptions\/[^\s,;]+/gi, "[resource_id]")
    .replace(/https?:\/\/[^\s,;]+/gi, "[url]")
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, "[guid]")
    .replace(/\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b/g, "[email]")
    .replace(/\b(?:\d{1,3}\.){3}\d{1,3}\b/g, "[ip]")
    .replace(/\b(?:[0-9a-f]{1,4}:){2,7}[0-9a-f]{1,4}\b/gi, "[ip]")
    .replace(/\b[A-Za-z0-9+/]{40,}={0,2}/g, "[secret]");
}

const windowText = boundedText(40).optional();

/** The tools whose providers live in Azure; each answers `unavailable` when its provider is not configured. */
export function providerTools(deps: ConsoleToolDependencies): Tool[] {
  const p = deps.providers;
  const snapshotTool = (name: string, description: string, provider: keyof typeof p, label: string) =>
    defineTool({
      descriptor: {
        name,
        description,
        argument_hint: name,
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["unavailable", "not_found"],
      },
      args: z.strictObject({}),
      async run(_args, context) {
        const source = requireProvider(p[provider] as SnapshotProvider<Record<string, unknown>> | undefined, label);
        // Read as stored: never rediscovered or recomputed here.
        const snapshot = await source.latest();
        if (!snapshot) throw new ToolError("unavailable", `no ${label} snapshot has been recorded`);
        const observedAt = Date.parse(String(snapshot.observed_at));
        // Stale evidence is not an answer (query rule 3): the producer has not run for too long.
        if (source.maxAgeMs !== undefined && !(context.now().getTime() - observedAt <= source.maxAgeMs))
          throw new ToolError(
            "unavailable",
            `the latest ${label} was observed at ${String(snapshot.observed_at)}, more than ${Math.round(source.maxAgeMs / 1000)} s ago: it is not answered as current`,
            { observed_at: snapshot.observed_at },
          );
        return {
          data: snapshot,
          evidence_ref: `${name}:${String(snapshot.snapshot_id ?? snapshot.observed_at ?? "latest")}`,
        };
      },
    });
  return [
    defineTool({
      descriptor: {
        name: "query_subscription_scope",
        description:
          "Returns the display name and state of the server-configured subscription with its id masked and the observation time.",
        argument_hint: "query_subscription_scope",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["unavailable"],
      },
      // No caller-supplied scope: the strict empty schema rejects one.
      args: z.strictObject({}),
      async run() {
        const scope = await requireProvider(p.subscription, "the subscription provider").scope();
        const masked = `${"*".repeat(Math.max(0, scope.subscription_id.length - 4))}${scope.subscription_id.slice(-4)}`;
        return {
          data: {
            display_name: scope.display_name,
            state: scope.state,
            subscription_id_masked: masked,
            observed_at: scope.observed_at,
          },
          evidence_ref: `subscription:${scope.observed_at}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "query_subscription_health",
        description:
          "Checks the server-configured read scope through inventory, resource health and representative metrics, with findings, coverage gaps, freshness and truncation.",
        argument_hint: "query_subscription_health",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["unavailable"],
      },
      args: z.strictObject({}),
      async run() {
        const health = await requireProvider(p.subscription, "the subscription provider").health();
        return { data: health, evidence_ref: `subscription_health:${health.observed_at}` };
      },
    }),
    snapshotTool(
      "query_detection_readiness",
      "Returns the latest stored cluster readiness verdict with its six-axis coverage gaps and authority ceiling.",
      "detectionReadiness",
      "the detection readiness snapshot",
    ),
    snapshotTool(
      "query_t2_recovery",
      "Returns sanitized verifier proposer-attempt evidence: retained attempt count, recovery state, route role, failure class, observation time and legacy-detail gap.",
      "t2Recovery",
      "the T2 recovery snapshot",
    ),
    snapshotTool(
      "query_configuration_baseline",
      "Returns the frozen configuration baseline with current scoped observations and integrity-pinned citations.",
      "configurationBaseline",
      "the configuration baseline",
    ),
    defineTool({
      descriptor: {
        name: "capture_browser_evidence",
        description: "Captures a credential-free bounded browser artifact under an exact server-owned policy.",
        argument_hint:
          "capture_browser_evidence policy_id=<id> policy_version=<n> source_url=https://… stable_selectors=<css>[,<css>]",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "unavailable"],
      },
      args: z.strictObject({
        policy_id: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/),
        policy_version: z.coerce.number().int().min(1),
        source_url: z.url({ protocol: /^https$/ }).max(2000),
        stable_selectors: z
          .union([boundedText(2000).transform((s) => s.split(",").map((x) => x.trim())), z.array(boundedText(200))])
          .pipe(z.array(z.string().min(1)).min(1).max(10)),
      }),
      async run(args) {
        const artifact = await requireProvider(p.browserEvidence, "the browser evidence provider").capture(args);
        return { data: artifact, evidence_ref: `artifact:${artifact.artifact_id}` };
      },
    }),
    defineTool({
      descriptor: {
        name: "query_log",
        description:
          "Runs one bounded query or one server-owned diagnostic template on the single configured log workspace, over at most 24 hours.",
        argument_hint: `query_log template=${Object.keys(LOG_TEMPLATES).join("|")} [window=30m|2h|30분|2시간] [signature=<id>] [operation_id=<id>]`,
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "unavailable"],
      },
      args: z.strictObject({
        template: z.enum(Object.keys(LOG_TEMPLATES) as [LogTemplate, ...LogTemplate[]]),
        window: windowText,
        signature: z
          .string()
          .regex(/^[\w.:-]{1,200}$/)
          .optional(),
        operation_id: z
          .string()
          .regex(/^[\w-]{1,100}$/)
          .optional(),
      }),
      async run(args, context) {
        // Templates that need an exact selector ask for it and call no provider.
        if (args.template === "error_signature_range" && !args.signature)
          throw new ToolError("invalid_arguments", "Which exact error signature should the time range cover?", {
            clarifying_question: true,
          });
        if (args.template === "related_logs" && !args.operation_id)
          throw new ToolError("invalid_arguments", "Which exact operation id should the related logs follow?", {
            clarifying_question: true,
          });
        const logs = requireProvider(p.logs, "the log workspace provider");
        const window = parseWindowMs(args.window) ?? { ms: MAX_QUERY_WINDOW_MS, clamped: false };
        const end = context.now();
        const start = new Date(end.getTime() - window.ms);
        // The exact selector reaches the template as a string literal bound by `let`; its schema
        // (letters, digits, '.', ':', '_', '-') leaves no way to close the literal.
        const selector =
          args.template === "error_signature_range"
            ? `let signature = '${args.signature}';\n`
            : args.template === "related_logs"
              ? `let selected_operation = '${args.operation_id}';\n`
              : "";
        const result = await logs.query(`${selector}${LOG_TEMPLATES[args.template]}`, { start, end });
        const tables = result.tables.map((t) => ({
          name: t.name,
          columns: t.columns,
          rows: t.rows.slice(0, 200).map((row) => row.map(redactLogCell)),
        }));
        return {
          data: {
            workspace: "configured",
            template: args.template,
            window: { start: start.toISOString(), end: end.toISOString(), clamped: window.clamped },
            tables,
          },
          evidence_ref: `log:${args.template}@${end.toISOString()}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "query_metric",
        description: "Reads one cloud monitor metric over a window of at most 24 hours with one aggregation.",
        argument_hint:
          "query_metric namespace=<ns> metric=<name> [window=1h] [aggregation=Average|Total|Maximum|Minimum|Count]",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "unavailable"],
      },
      args: z.strictObject({
        namespace: z.string().regex(/^[\w./-]{1,200}$/),
        metric: z.string().regex(/^[\w./ -]{1,200}$/),
        window: windowText,
        aggregation: z.enum(["Average", "Total", "Maximum", "Minimum", "Count"]).default("Average"),
      }),
      async run(args, context) {
        const metrics = requireProvider(p.metrics, "the metrics provider");
        const window = parseWindowMs(args.window) ?? { ms: 3_600_000, clamped: false };
        const end = context.now();
        const start = new Date(end.getTime() - window.ms);
        const result = await metrics.query({
          namespace: args.namespace,
          metric: args.metric,
          window: { start, end },
          aggregation: args.aggregation,
        });
        return {
          data: {
            ...args,
            window: { start: start.toISOString(), end: end.toISOString(), clamped: window.clamped },
            ...result,
          },
          evidence_ref: `metric:${args.namespace}/${args.metric}@${end.toISOString()}`,
        };
      },
    }),
  ];
}
