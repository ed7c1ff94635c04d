import { z } from "zod";
import type { ActionTypeCatalog } from "../actions/action-types.js";
import { catalogPath, RESOURCE_TYPES } from "../actions/action-types.js";
import { dependencyDigest, loadCatalogFile } from "../catalog/json-catalog.js";

/** Severity of a verdict and of an incident, lowest first; the order is what "rises" means. */
export const SEVERITIES = ["info", "low", "medium", "high", "critical"] as const;
export type Severity = (typeof SEVERITIES)[number];

/** What T0 decides for a signal: record it, notify, propose an action, or escalate to the Owners. */
export const DECISIONS = ["record", "notify", "propose_action", "escalate"] as const;
export type Decision = (typeof DECISIONS)[number];

const ruleSchema = z.strictObject({
  id: z.string().regex(/^R-[A-Z]+-\d{3}$/, "rule ids look like R-JOB-001"),
  resource_type: z.enum(RESOURCE_TYPES),
  signal: z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/),
  decision: z.enum(DECISIONS),
  severity: z.enum(SEVERITIES),
  proposed_action: z.string().optional(),
  description: z.string().min(1).max(300),
});

/** One T0 rule: (resource type, signal) → a deterministic verdict. */
export type Rule = z.output<typeof ruleSchema>;

export const ruleCatalogSchema = z
  .strictObject({
    version: z.literal(1),
    vocabulary: z.array(
      z.strictObject({
        term: z.string().min(1),
        kind: z.enum(["resource_type", "mode", "signal"]),
        definition: z.string().min(1).max(300),
      }),
    ),
    rules: z.array(ruleSchema).min(1),
  })
  .superRefine((catalog, ctx) => {
    const ids = new Set<string>();
    const keys = new Set<string>();
    catalog.rules.forEach((rule, index) => {
      if (ids.has(rule.id))
        ctx.addIssue({ code: "custom", path: ["rules", index, "id"], message: `duplicate rule id ${rule.id}` });
      const key = `${rule.resource_type} ${rule.signal}`;
      if (keys.has(key))
        ctx.addIssue({ code: "custom", path: ["rules", index, "signal"], message: `a second rule for ${key}` });
      ids.add(rule.id);
      keys.add(key);
      if ((rule.decision === "propose_action") !== (rule.proposed_action !== undefined) && rule.decision !== "escalate")
        ctx.addIssue({
          code: "custom",
          path: ["rules", index, "proposed_action"],
          message: "propose_action needs a proposed_action, and only it or escalate may have one",
        });
    });
  });

export type RuleCatalog = z.output<typeof ruleCatalogSchema>;

/** The T0 verdict for one event: deterministic, citing the rule ids it rests on. */
export interface Verdict {
  tier: "T0";
  decision: Decision | "no_rule";
  severity: Severity;
  rule_ids: string[];
  proposed_action?: string;
}

/** The resource type of a `resource_ref` (`blast_job/<id>` → `blast_job`). */
export function resourceTypeOf(resourceRef: string): string {
  return resourceRef.split("/", 1)[0] ?? resourceRef;
}

/** Applies T0 to a signal: the one rule for (resource type, signal), or `no_rule` (severity info). */
export function evaluateRules(catalog: RuleCatalog, event: { event_type: string; resource_ref: string }): Verdict {
  const type = resourceTypeOf(event.resource_ref);
  const rule = catalog.rules.find((r) => r.resource_type === type && r.signal === event.event_type);
  if (!rule) return { tier: "T0", decision: "no_rule", severity: "info", rule_ids: [] };
  return {
    tier: "T0",
    decision: rule.decision,
    severity: rule.severity,
    rule_ids: [rule.id],
    ...(rule.proposed_action ? { proposed_action: rule.proposed_action } : {}),
  };
}

/** The rule catalog's schema over an action-type catalog: each proposed action must be one of its types. */
export function ruleCatalogSchemaFor(actions: ActionTypeCatalog) {
  const known = new Set(actions.action_types.map((a) => a.id));
  return ruleCatalogSchema.superRefine((catalog, ctx) => {
    catalog.rules.forEach((rule, index) => {
      if (rule.proposed_action !== undefined && !known.has(rule.proposed_action))
        ctx.addIssue({
          code: "custom",
          path: ["rules", index, "proposed_action"],
          message: `unknown action type ${rule.proposed_action}`,
        });
    });
  });
}

/** What the rule catalog's validation depends on beyond its text: the action types it was checked against. */
export const ruleCatalogDependencies = (actions: ActionTypeCatalog) => ({
  "action-types.json": dependencyDigest(actions),
});

/**
 * Loads `config/ops-rules.json` and checks each proposed action against the action-type catalog;
 * any problem throws a `CatalogLoadError` naming the file and line.
 */
export function loadRuleCatalog(actions: ActionTypeCatalog, file = catalogPath("ops-rules.json")): RuleCatalog {
  return loadCatalogFile(file, ruleCatalogSchemaFor(actions), ruleCatalogDependencies(actions));
}
