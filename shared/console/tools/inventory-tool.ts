import { z } from "zod";
import type { InventoryRecord, InventorySnapshot } from "../providers/providers.js";
import type { ConsoleToolDependencies } from "./dependencies.js";
import { resourceHealthHistory } from "./resource-health-history.js";
import { boundedText, defineTool, requireProvider, type Tool, ToolError } from "./tool.js";

/** Query rule 1: at most this many records, after sorting. */
export const INVENTORY_RECORD_LIMIT = 40;
/** Query rule 2: the longest inventory input text. */
export const INVENTORY_TEXT_MAX = 4096;
/** Query rule 3: current-state answers need a snapshot at most this old. */
export const INVENTORY_MAX_AGE_MS = 60_000;
/** The resource type of VM shutdown schedules (query rule 5). */
export const VM_SHUTDOWN_SCHEDULE_TYPE = "compute.vm-shutdown-schedule";
/** Query rule 5: the closed evening interval, minutes after local midnight. */
const EVENING = { from: 18 * 60, to: 23 * 60 + 59 };

const ALLOWED_FIELDS = ["name", "type", "location", "resource_group", "state", "relations"] as const;
const project = (r: InventoryRecord) => Object.fromEntries(ALLOWED_FIELDS.map((f) => [f, r[f]]));

const inventoryText = z
  .string()
  .min(1, "must not be empty")
  .max(INVENTORY_TEXT_MAX, `must be at most ${INVENTORY_TEXT_MAX} characters`)
  .pipe(boundedText(INVENTORY_TEXT_MAX));

const argsSchema = z.strictObject({
  kind: z
    .enum(["list", "count", "summary", "scope_counts", "scheduled_shutdown", "resource_health_history"])
    .default("list"),
  resource_type: boundedText(100).optional(),
  /** Name text to match (contains, case-insensitive). */
  filter: inventoryText.optional(),
  state: boundedText(50).optional(),
  /** Negated state: a bounded `not_in` list. */
  state_not_in: z.array(boundedText(50)).min(1).max(10).optional(),
  group_by: z.enum(["state", "type", "location"]).optional(),
  /** 1-based position in the sorted list (an ordinal follow-up). */
  ordinal: z.coerce.number().int().min(1).max(INVENTORY_RECORD_LIMIT).optional(),
  /** `kind=resource_health_history` only: the interval, clamped to 24 hours (query rule 8). */
  window: boundedText(40).optional(),
});

/** Minutes after local midnight of `at` in `timeZone`; throws on an unknown time zone. */
function localMinutes(at: Date, timeZone: string): number {
  const parts = new Intl.DateTimeFormat("en-GB", {
    timeZone,
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).formatToParts(at);
  const value = (type: string) => Number(parts.find((p) => p.type === type)?.value);
  return value("hour") * 60 + value("minute");
}

/**
 * Query rule 5: enabled schedules whose time today falls in 18:00–23:59 and has not passed at the
 * reference time. Anything that makes the count uncertain answers `unavailable`, never zero.
 */
function scheduledShutdowns(snapshot: InventorySnapshot, reference: Date, serverTimeZone: string) {
  const unavailable = (why: string) => {
    throw new ToolError("unavailable", `the scheduled shutdown count is unavailable: ${why}`, {
      query_kind: "scheduled_shutdown",
      resource_type: VM_SHUTDOWN_SCHEDULE_TYPE,
    });
  };
  if (snapshot.truncated) unavailable("the inventory snapshot is truncated");
  if (snapshot.coverage_gaps.includes(VM_SHUTDOWN_SCHEDULE_TYPE) || snapshot.coverage_gaps.includes("compute"))
    unavailable("the snapshot does not cover shutdown schedules");
  const schedules = snapshot.records.filter((r) => r.type === VM_SHUTDOWN_SCHEDULE_TYPE);
  const counted: string[] = [];
  for (const record of schedules) {
    const s = record.schedule;
    const match = s ? /^(\d{2}):?(\d{2})$/.exec(s.time) : null;
    if (!s || !match) return unavailable(`schedule ${record.name} is malformed`);
    const minutes = Number(match[1]) * 60 + Number(match[2]);
    if (minutes >= 24 * 60 || Number(match[2]) >= 60) return unavailable(`schedule ${record.name} is malformed`);
    let nowLocal: number;
    try {
      nowLocal = localMinutes(reference, s.time_zone);
    } catch {
      return unavailable(`schedule ${record.name} has an unsupported time zone`);
    }
    if (s.enabled && minutes >= EVENING.from && minutes <= EVENING.to && minutes >= nowLocal) counted.push(record.name);
  }
  return {
    query_kind: "scheduled_shutdown",
    resource_type: VM_SHUTDOWN_SCHEDULE_TYPE,
    reference_time: reference.toISOString(),
    reference_time_zone: serverTimeZone,
    interval: "18:00-23:59",
    count: counted.length,
    schedules: counted.sort(),
  };
}

/** query_inventory over the configured inventory provider (the local stack's own resources on `npm start`). */
export function inventoryTool(deps: ConsoleToolDependencies, options: { serverTimeZone?: string } = {}): Tool {
  return defineTool({
    descriptor: {
      name: "query_inventory",
      description:
        "Answers counts, lists, types, locations, resource groups, names, states and relations from the server-owned inventory.",
      argument_hint:
        "query_inventory [kind=list|count|summary|scope_counts|scheduled_shutdown|resource_health_history] [resource_type=<t>] [filter=<text>] [state=<s>] [group_by=state|type|location] [ordinal=1..40] [window=24h (resource_health_history, filter=<name>)]",
      rbac_floor: "Reader",
      side_effect_class: "read",
      failure_modes: ["invalid_arguments", "unavailable"],
    },
    args: argsSchema,
    async run(args, context) {
      // Query rule 8 reads Resource Health, not the inventory snapshot.
      if (args.kind !== "resource_health_history" && args.window !== undefined)
        throw new ToolError("invalid_arguments", "window applies to kind=resource_health_history only");
      if (args.kind === "resource_health_history")
        return resourceHealthHistory(deps.providers.resourceHealth, {
          resource: args.filter,
          window: args.window,
          now: context.now(),
        });
      const provider = requireProvider(deps.providers.inventory, "the inventory provider");
      let snapshot: InventorySnapshot;
      try {
        snapshot = await provider.snapshot({ maxAgeMs: INVENTORY_MAX_AGE_MS });
      } catch {
        throw new ToolError("unavailable", "the inventory provider did not deliver a fresh snapshot");
      }
      // Query rule 3: never answer current state from stale evidence.
      if (context.now().getTime() - Date.parse(snapshot.observed_at) > INVENTORY_MAX_AGE_MS)
        throw new ToolError("unavailable", "the inventory snapshot is stale and no refresh arrived");
      const evidence = {
        scope: snapshot.scope,
        snapshot_id: snapshot.snapshot_id,
        provenance: snapshot.provenance,
        observed_at: snapshot.observed_at,
        coverage_gaps: snapshot.coverage_gaps,
        truncated: snapshot.truncated,
      };
      const evidence_ref = `inventory:${snapshot.snapshot_id}`;
      if (args.kind === "scheduled_shutdown")
        return {
          data: { ...scheduledShutdowns(snapshot, context.now(), options.serverTimeZone ?? "UTC"), ...evidence },
          evidence_ref,
        };
      const resources = snapshot.records.filter((r) => r.kind === "resource");
      if (args.kind === "scope_counts") {
        return {
          data: {
            resource_total: resources.length,
            resource_group_total: snapshot.records.filter((r) => r.kind === "resource_group").length,
            ...evidence,
          },
          evidence_ref,
        };
      }
      if (args.kind === "summary" && !args.resource_type && !args.filter && !args.state && !args.state_not_in) {
        const byType: Record<string, number> = {};
        for (const r of resources) byType[r.type] = (byType[r.type] ?? 0) + 1;
        return {
          data: {
            resource_total: resources.length,
            by_type: byType,
            resource_groups: snapshot.records.filter((r) => r.kind === "resource_group").length,
            derived_records: snapshot.records.filter((r) => r.kind === "derived").length,
            ...evidence,
          },
          evidence_ref,
        };
      }
      const needle = args.filter?.toLowerCase();
      const matching = snapshot.records
        .filter((r) =>
          args.resource_type ? r.type === args.resource_type : r.kind !== "resource_group" || args.filter !== undefined,
        )
        .filter((r) => !needle || r.name.toLowerCase().includes(needle))
        .filter((r) => !args.state || r.state === args.state)
        .filter((r) => !args.state_not_in?.includes(r.state));
      const key = args.group_by === "type" ? "type" : args.group_by;
      matching.sort((a, b) => (key ? a[key].localeCompare(b[key]) : 0) || a.name.localeCompare(b.name));
      if (args.kind === "count") return { data: { count: matching.length, ...evidence }, evidence_ref };
      const records = matching.slice(0, INVENTORY_RECORD_LIMIT).map(project);
      if (args.ordinal !== undefined) {
        const picked = records[args.ordinal - 1];
        if (!picked)
          throw new ToolError(
            "not_found",
            `the list has ${records.length} records; there is no number ${args.ordinal}`,
          );
        return { data: { ordinal: args.ordinal, record: picked, ...evidence }, evidence_ref };
      }
      return {
        data: {
          total: matching.length,
          returned: records.length,
          sort: key ? [key, "name"] : ["name"],
          records,
          ...evidence,
        },
        evidence_ref,
      };
    },
  });
}
