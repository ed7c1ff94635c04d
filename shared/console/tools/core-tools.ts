import { z } from "zod";
import { evaluateRules, type RuleCatalog, resourceTypeOf } from "../../ops/rules/rule-catalog.js";
import { queryAudit } from "../../ops/audit-query.js";
import { auditVisibleTo } from "../../ops/audit.js";
import { EVIDENCE_ID_PATTERN } from "../../ops/evidence-store.js";
import { correlateIncidents } from "../../ops/incidents/incidents.js";
import type { ConsoleToolDependencies } from "./dependencies.js";
import { boundedText, defineTool, meetsFloor, requireProvider, type Tool, ToolError } from "./tool.js";

const eventPayloadSchema = z.strictObject({
  event_type: z.string().regex(/^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$/, "event_type must be dotted lowercase words"),
  resource_ref: boundedText(500).pipe(z.string().min(1)),
  source: boundedText(200).optional(),
  idempotency_key: boundedText(512).optional(),
  detected_at: z.iso.datetime({ offset: true }).optional(),
  mode: z.enum(["shadow", "enforce"]).optional(),
  payload: z.unknown().optional(),
});

/** Sources that report from inside the control plane; anything else routes as untrusted input. */
const KNOWN_SOURCES = new Set(["dashboard", "dashboard.submit", "database.update_check", "jobapi", "ops.incidents"]);

/** Trust routing: known sources go to T0; unknown sources are observed only (shadow), whatever they ask. */
function routeEvent(source: string | undefined, mode: "shadow" | "enforce" | undefined) {
  const trusted = source !== undefined && KNOWN_SOURCES.has(source);
  return {
    trust: trusted ? "known_source" : "untrusted_source",
    route: "t0",
    mode: trusted ? (mode ?? "shadow") : "shadow",
  } as const;
}

/** Rules for the signal on any resource type: the candidates T0 chose among. */
function candidateRuleIds(rules: RuleCatalog, eventType: string): string[] {
  return rules.rules.filter((r) => r.signal === eventType).map((r) => r.id);
}

const idText = (max: number) => boundedText(max).pipe(z.string().min(1));

/** describe_event, explain_verdict, explore_catalog, query_audit, correlate_incident, simulate_change. */
export function coreTools(deps: ConsoleToolDependencies): Tool[] {
  return [
    defineTool({
      descriptor: {
        name: "describe_event",
        description:
          "Runs one event through ingest validation, trust routing and the T0 rules in memory only, returning the routing decision and candidate rule ids.",
        argument_hint:
          'describe_event {"event_type":"job.failed","resource_ref":"blast_job/<id>","source":"dashboard"}',
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments"],
      },
      args: z.strictObject({ payload: eventPayloadSchema }),
      jsonArg: "payload",
      // In memory only: no audit write, no pull request, no T1/T2, no adapters.
      audited: false,
      async run({ payload }) {
        const routing = routeEvent(payload.source, payload.mode);
        const verdict = evaluateRules(deps.rules, payload);
        return {
          data: {
            routing,
            verdict,
            candidate_rule_ids: candidateRuleIds(deps.rules, payload.event_type),
            resource_type: resourceTypeOf(payload.resource_ref),
          },
          evidence_ref: `in-memory:${verdict.rule_ids.join(",") || "no_rule"}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "explain_verdict",
        description:
          "Reads the audit trail of a processed event and returns its tier, decision, citing rule ids, verifier report and mode.",
        argument_hint: "explain_verdict event_id=<uuid>",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "not_found"],
      },
      args: z.strictObject({ event_id: idText(100) }),
      async run({ event_id }, context) {
        const page = await queryAudit(deps.audit, {
          role: context.role,
          event_id,
          action: "ops.event_processed",
          page_size: 1,
        });
        const entry = page.entries[0];
        if (!entry) throw new ToolError("not_found", `no processed event ${event_id} in the audit trail`);
        const d = entry.details;
        return {
          data: {
            event_id,
            tier: d.tier,
            decision: d.decision,
            rule_ids: d.rule_ids,
            verifier_report: d.verifier_report ?? null,
            mode: d.mode,
            processed_at: entry.at,
          },
          evidence_ref: `audit:${entry.audit_id}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "explore_catalog",
        description:
          "Searches the rule catalog, the action-type catalog and the vocabulary by id, keyword or resource type.",
        argument_hint: "explore_catalog query=<id, keyword or resource type>",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments"],
      },
      args: z.strictObject({ query: idText(200) }),
      async run({ query }) {
        const q = query.trim().toLowerCase();
        const has = (...fields: (string | undefined)[]) => fields.some((f) => f?.toLowerCase().includes(q));
        const rules = deps.rules.rules.filter(
          (r) =>
            r.id.toLowerCase() === q || r.resource_type === q || has(r.id, r.signal, r.description, r.proposed_action),
        );
        const action_types = deps.actions.action_types.filter(
          (a) => a.id === q || a.resource_type === q || has(a.id, a.title),
        );
        const vocabulary = deps.rules.vocabulary.filter((v) => has(v.term, v.definition));
        return {
          data: {
            rules,
            action_types,
            vocabulary,
            catalog_versions: { rules: deps.rules.version, action_types: deps.actions.version },
          },
          evidence_ref: `catalog:rules@${deps.rules.version},action_types@${deps.actions.version}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "query_audit",
        description:
          "Searches the audit log by event id, actor, decision, mode and time range one page at a time, or reads one stored piece of evidence an entry references.",
        argument_hint:
          "query_audit [event_id=<id>] [actor=<oid or name>] [decision=<d>] [mode=<m>] [since=<RFC 3339>] [until=<RFC 3339>] [limit=1..100] [cursor=<c>] | query_audit evidence_id=sha256-<64 hex>",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "not_found", "forbidden", "unavailable"],
      },
      roleScopedResult: true,
      args: z.strictObject({
        event_id: idText(100).optional(),
        actor: idText(200).optional(),
        decision: idText(50).optional(),
        mode: idText(20).optional(),
        since: z.iso.datetime({ offset: true }).optional(),
        until: z.iso.datetime({ offset: true }).optional(),
        limit: z.coerce.number().int().min(1).max(100).default(20),
        cursor: idText(200).optional(),
        /** An `evidence_blob.evidence_id` (or a browser artifact id): that evidence instead of a page. */
        evidence_id: z
          .string()
          .regex(EVIDENCE_ID_PATTERN, "evidence ids look like sha256- and 64 hex digits")
          .optional(),
      }),
      async run(args, context) {
        if (args.evidence_id !== undefined) {
          const evidence = requireProvider(deps.evidence, "the evidence store");
          const described = await evidence.describe(args.evidence_id);
          if (!described) throw new ToolError("not_found", `no evidence ${args.evidence_id} is stored`);
          // Readable from the floor of the tool that produced it (checked before any download): no role reads more by id than it could have asked for.
          if (!meetsFloor(context.role, described.rbac_floor))
            throw new ToolError(
              "forbidden",
              `evidence ${args.evidence_id} requires the ${described.rbac_floor} role; your current role is ${context.role}`,
            );
          const stored = await evidence.get(args.evidence_id);
          if (!stored) throw new ToolError("not_found", `no evidence ${args.evidence_id} is stored`);
          const json = stored.reference.content_type === "application/json";
          return {
            data: {
              evidence: stored.reference,
              ...(json
                ? { content: JSON.parse(stored.bytes.toString("utf8")) as unknown }
                : { content_base64: stored.bytes.toString("base64") }),
            },
            evidence_ref: `evidence:${args.evidence_id}`,
          };
        }
        const page = await queryAudit(deps.audit, {
          // Only what the caller's role may read (issue 21 item 2): approval content is Approver-scoped.
          role: context.role,
          event_id: args.event_id,
          actor: args.actor,
          decision: args.decision,
          mode: args.mode,
          since: args.since ? new Date(args.since) : undefined,
          until: args.until ? new Date(args.until) : undefined,
          page_size: args.limit,
          cursor: args.cursor,
        }).catch((error: unknown) => {
          throw new ToolError("invalid_arguments", error instanceof Error ? error.message : "invalid query");
        });
        return { data: page, evidence_ref: `audit:${page.entries.map((e) => e.audit_id).join(",") || "none"}` };
      },
    }),
    defineTool({
      descriptor: {
        name: "correlate_incident",
        description: "Correlates the ingest events, audit entries, inventory, logs and metrics of one incident.",
        argument_hint: "correlate_incident incident_id=INC-<12 hex>",
        rbac_floor: "Reader",
        side_effect_class: "read",
        failure_modes: ["invalid_arguments", "not_found"],
      },
      roleScopedResult: true,
      args: z.strictObject({
        incident_id: z.string().regex(/^INC-[0-9a-f]{12}$/, "incident ids look like INC- and 12 hex digits"),
      }),
      async run({ incident_id }, context) {
        const events = await deps.events.list({ limit: 1000 });
        const { incidents } = correlateIncidents(events, deps.rules, {
          windowMs: deps.incidentWindowMs,
          now: context.now(),
        });
        const incident = incidents.find((i) => i.incident_id === incident_id);
        if (!incident) throw new ToolError("not_found", `no incident ${incident_id} among the latest 1000 events`);
        const members = events.filter((e) => incident.member_event_ids.includes(e.event_id));
        const audit = (await deps.audit.list({ limit: 1000 })).filter(
          (a) =>
            auditVisibleTo(a, context.role) &&
            typeof a.details.event_id === "string" &&
            incident.member_event_ids.includes(a.details.event_id),
        );
        const unavailable = (provider: string) => ({ status: "unavailable", provider });
        let inventory: unknown = unavailable("inventory");
        if (deps.providers.inventory) {
          try {
            const snapshot = await deps.providers.inventory.snapshot({ maxAgeMs: 60_000 });
            const name = incident.resource_ref.slice(incident.resource_ref.indexOf("/") + 1);
            inventory = {
              status: "ok",
              snapshot_id: snapshot.snapshot_id,
              observed_at: snapshot.observed_at,
              records: snapshot.records.filter((r) => r.name === name),
            };
          } catch {
            inventory = unavailable("inventory");
          }
        }
        return {
          data: {
            incident,
            signals: {
              events: members,
              audit,
              inventory,
              logs: deps.providers.logs
                ? { status: "not_queried", hint: "query_log with a template for this window" }
                : unavailable("logs"),
              metrics: deps.providers.metrics
                ? { status: "not_queried", hint: "query_metric for this window" }
                : unavailable("metrics"),
            },
          },
          evidence_ref: `incident:${incident_id}`,
        };
      },
    }),
    defineTool({
      descriptor: {
        name: "simulate_change",
        description:
          "Runs one scenario event through T0 and the verifier in observation mode, publishing nothing and recording an audit entry.",
        argument_hint: 'simulate_change {"event_type":"job.failed","resource_ref":"blast_job/<id>"}',
        rbac_floor: "Contributor",
        side_effect_class: "simulate",
        failure_modes: ["invalid_arguments"],
      },
      args: z.strictObject({ scenario: eventPayloadSchema }),
      jsonArg: "scenario",
      async run({ scenario }) {
        const verdict = evaluateRules(deps.rules, scenario);
        const verifier_report = verdict.proposed_action
          ? await deps.verify({ action_type: verdict.proposed_action, target: scenario.resource_ref, params: {} })
          : null;
        return {
          data: { mode: "observation", published: false, verdict, verifier_report },
          evidence_ref: `simulation:${verdict.rule_ids.join(",") || "no_rule"}`,
        };
      },
    }),
  ];
}
