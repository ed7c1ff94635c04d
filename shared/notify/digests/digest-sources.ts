import { ACTION_OUTCOMES_TABLE, type ActionOutcome } from "../../ops/actions/action-outcomes.js";
import type { AuditEntry, AuditLog } from "../../ops/audit.js";
import type { EventLog } from "../../ops/events.js";
import { correlateIncidents } from "../../ops/incidents/incidents.js";
import type { RuleCatalog } from "../../ops/rules/rule-catalog.js";
import { odata } from "@azure/data-tables";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { BriefingFact, BriefingInput, Severity } from "./briefing.js";
import type { DigestSource } from "./digests.js";

/**
 * The sources of the spec's scheduled digests (operator-console.md §6 item 6): each reads the
 * product's own stores for one period and gives the briefing composer what it found — counts and
 * short lines, never a requester's identity, a secret or a raw payload. What a store cannot say is
 * left out rather than invented (there is no cost store yet, so no digest states a cost).
 *
 * | Route | From |
 * |---|---|
 * | `digest_shadow_accuracy_daily` | action outcomes in shadow mode: recorded (would have acted) vs refused (the target had changed) |
 * | `digest_override_retro_weekly` | override drafts filed in the week (`/svc override draft`) |
 * | `digest_enforce_promotion_weekly` | action types still in shadow mode with enough clean shadow outcomes in the week |
 * | `digest_governance_pr_aging_weekly` | drafts on record (the proposals `/svc` files), by age at the week's end |
 * | `digest_exemption_expiry_weekly` | exemption drafts whose `until` falls in the week after the period |
 * | `digest_kpi_cost_monthly` | incidents opened in the month by severity, action outcomes split four ways |
 * | `digest_break_glass_usage` | break-glass activations granted and denied (audit `console.break_glass`) |
 */

/** The drafts table the `/svc` commands write (shared/channels/inbound/svc-commands.ts); read only here. */
const CHANNEL_DRAFTS_TABLE = "channeldrafts";

/** Fewest clean shadow outcomes of one action type in a week for it to be an enforce-promotion candidate. */
export const PROMOTION_MINIMUM = 5;
/** A draft older than this at the period's end counts as aging. */
const AGING_DAYS = 7;
const DAY_MS = 86_400_000;
/** Most rows one source reads from one store (a listing stops there and says so). */
const READ_CAP = 5000;

export interface DigestSourceDependencies {
  tables: TableSource;
  audit: AuditLog;
  events: EventLog;
  rules: RuleCatalog;
  /** The operations loop's incident window (incidents are recomputed from the event log the same way). */
  incidentWindowMs: number;
  /** An action type's current mode. */
  modeOf(actionType: string): "shadow" | "enforce";
  promotionMinimum?: number;
}

type Extra = Omit<BriefingInput, "title" | "period" | "notices">;

interface StoredDraft {
  draft_id: string;
  kind: string;
  params: Record<string, string>;
  created_at: string;
}

const day = (iso: string) => iso.slice(0, 10);

export function createDigestSources(deps: DigestSourceDependencies): Record<string, DigestSource> {
  const outcomesTable = tableOpener(deps.tables, ACTION_OUTCOMES_TABLE);
  const draftsTable = tableOpener(deps.tables, CHANNEL_DRAFTS_TABLE);
  const minimum = deps.promotionMinimum ?? PROMOTION_MINIMUM;

  /** Finished action outcomes of `[from, to)` (a `planned` one is not an outcome yet). */
  async function outcomes(from: Date, to: Date): Promise<{ rows: ActionOutcome[]; capped: boolean }> {
    const rows: ActionOutcome[] = [];
    for await (const e of (await outcomesTable()).listEntities<{
      idempotency_key: string;
      action_type: string;
      target: string;
      state: ActionOutcome["state"];
      mode: ActionOutcome["mode"];
      at: string;
    }>({
      queryOptions: {
        filter: odata`at ge ${from.toISOString()} and at lt ${to.toISOString()} and state ne ${"planned"}`,
      },
    })) {
      if (rows.length >= READ_CAP) return { rows, capped: true };
      rows.push({ ...e, action_hash: "", plan: null, result: null });
    }
    return { rows, capped: false };
  }

  async function drafts(kind?: string): Promise<StoredDraft[]> {
    const out: StoredDraft[] = [];
    for await (const row of (await draftsTable()).listEntities<{ doc: string }>(
      kind ? { queryOptions: { filter: odata`PartitionKey eq ${kind}` } } : {},
    )) {
      try {
        out.push(JSON.parse(row.doc) as StoredDraft);
      } catch {
        // A row that is not a draft is not counted.
      }
      if (out.length >= READ_CAP) break;
    }
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.draft_id.localeCompare(b.draft_id));
  }

  /** Audit entries of one action in `[from, to)`, oldest first (the log lists newest first, by pages). */
  async function audited(action: string, from: Date, to: Date): Promise<AuditEntry[]> {
    const out: AuditEntry[] = [];
    let after: { at: string; audit_id: string } | undefined;
    for (;;) {
      const page = await deps.audit.list({ action, since: from, limit: 1000, ...(after ? { after } : {}) });
      out.push(...page.filter((e) => Date.parse(e.at) < to.getTime()));
      const last = page.at(-1);
      if (page.length < 1000 || !last || out.length >= READ_CAP) break;
      after = { at: last.at, audit_id: last.audit_id };
    }
    return out.reverse();
  }

  const cappedFact = (capped: boolean, what: string): BriefingFact[] =>
    capped ? [{ label: `${what} read (the listing stops here; later ones are not counted)`, count: READ_CAP }] : [];

  return {
    async digest_shadow_accuracy_daily({ from, to }): Promise<Extra> {
      const { rows, capped } = await outcomes(from, to);
      const shadow = rows.filter((o) => o.mode === "shadow");
      const types = [...new Set(shadow.map((o) => o.action_type))].sort();
      const refused = shadow.filter((o) => o.state === "refused").length;
      return {
        facts: [
          {
            label: "Shadow outcomes (recorded what the action would do)",
            count: shadow.length - refused,
            items: types.map((t) => {
              const mine = shadow.filter((o) => o.action_type === t);
              const no = mine.filter((o) => o.state === "refused").length;
              return `${t}: ${mine.length - no} recorded, ${no} refused`;
            }),
          },
          { label: "Shadow proposals refused because the target had changed", count: refused },
          ...cappedFact(capped, "Action outcomes"),
        ],
      };
    },

    async digest_override_retro_weekly({ from, to }): Promise<Extra> {
      const filed = (await drafts("override")).filter(
        (d) => Date.parse(d.created_at) >= from.getTime() && Date.parse(d.created_at) < to.getTime(),
      );
      return {
        facts: [
          {
            label: "Override drafts filed",
            count: filed.length,
            items: filed.map(
              (d) => `${d.draft_id}: rule ${d.params.rule ?? "?"} → ${d.params.mode ?? "?"} (${day(d.created_at)})`,
            ),
          },
        ],
      };
    },

    async digest_enforce_promotion_weekly({ from, to }): Promise<Extra> {
      const { rows, capped } = await outcomes(from, to);
      const byType = new Map<string, ActionOutcome[]>();
      for (const o of rows.filter((r) => r.mode === "shadow"))
        byType.set(o.action_type, [...(byType.get(o.action_type) ?? []), o]);
      const candidates = [...byType]
        .filter(
          ([type, list]) =>
            deps.modeOf(type) === "shadow" && list.length >= minimum && list.every((o) => o.state === "done"),
        )
        .sort(([a], [b]) => a.localeCompare(b));
      return {
        facts: [
          {
            label: `Enforce-promotion candidates (still in shadow, at least ${minimum} shadow outcomes, none refused)`,
            count: candidates.length,
            items: candidates.map(([type, list]) => `${type}: ${list.length} shadow outcomes, none refused`),
          },
          ...cappedFact(capped, "Action outcomes"),
        ],
      };
    },

    async digest_governance_pr_aging_weekly({ to }): Promise<Extra> {
      const open = (await drafts()).filter((d) => Date.parse(d.created_at) < to.getTime());
      const age = (d: StoredDraft) => Math.floor((to.getTime() - Date.parse(d.created_at)) / DAY_MS);
      const aging = open.filter((d) => age(d) >= AGING_DAYS);
      return {
        facts: [
          { label: "Drafts on record", count: open.length },
          {
            label: `Drafts older than ${AGING_DAYS} days`,
            count: aging.length,
            items: aging.map((d) => `${d.draft_id} (${d.kind}): ${age(d)} days`),
          },
        ],
      };
    },

    async digest_exemption_expiry_weekly({ to }): Promise<Extra> {
      const horizon = to.getTime() + 7 * DAY_MS;
      const expiring = (await drafts("exemption"))
        .filter((d) => {
          const until = Date.parse(d.params.until ?? "");
          return until >= to.getTime() && until < horizon;
        })
        .sort((a, b) => Date.parse(a.params.until ?? "") - Date.parse(b.params.until ?? ""));
      return {
        facts: [
          {
            label: `Exemptions expiring by ${day(new Date(horizon).toISOString())}`,
            count: expiring.length,
            items: expiring.map(
              (d) => `${d.draft_id}: rule ${d.params.rule ?? "?"} on ${d.params.target ?? "?"} until ${d.params.until}`,
            ),
          },
        ],
      };
    },

    async digest_kpi_cost_monthly({ from, to }): Promise<Extra> {
      const events = await deps.events.list({ since: new Date(from.getTime() - deps.incidentWindowMs), limit: 1000 });
      const { incidents } = correlateIncidents(
        events.filter((e) => Date.parse(e.ingested_at) < to.getTime()),
        deps.rules,
        { windowMs: deps.incidentWindowMs, now: to },
      );
      const tally: Partial<Record<Severity, number>> = {};
      for (const i of incidents)
        if (Date.parse(i.opened_at) >= from.getTime() && Date.parse(i.opened_at) < to.getTime())
          tally[i.severity] = (tally[i.severity] ?? 0) + 1;
      const { rows, capped } = await outcomes(from, to);
      const done = rows.filter((o) => o.state === "done");
      // An approved action executes with its approval id as the idempotency key (approval-service).
      const approved = (o: ActionOutcome) => /^apr_[0-9a-f]{24}$/.test(o.idempotency_key);
      return {
        incidents: tally,
        actions: {
          auto: done.filter((o) => o.mode === "enforce" && !approved(o)).length,
          human_approved: done.filter((o) => o.mode === "enforce" && approved(o)).length,
          // The product never reverses an action it carried out: nothing is rolled back.
          rolled_back: 0,
          observation_only: done.filter((o) => o.mode === "shadow").length,
        },
        facts: [
          ...(events.length >= 1000
            ? [
                {
                  label: "Events read (the listing stops at 1000; older events of the month are not counted)",
                  count: 1000,
                },
              ]
            : []),
          ...cappedFact(capped, "Action outcomes"),
        ],
      };
    },

    async digest_break_glass_usage({ from, to }): Promise<Extra> {
      const uses = await audited("console.break_glass", from, to);
      const granted = uses.filter((e) => e.outcome === "succeeded");
      const denied = uses.filter((e) => e.outcome === "denied");
      const until = (e: AuditEntry) => String((e.details as { expires_at?: unknown } | undefined)?.expires_at ?? "?");
      return {
        facts: [
          {
            label: "Break-glass activations granted",
            count: granted.length,
            items: granted.map((e) => `${e.at} until ${until(e)} (audit ${e.audit_id})`),
          },
          {
            label: "Break-glass activations denied (no Owner page confirmed)",
            count: denied.length,
            items: denied.map((e) => `${e.at} (audit ${e.audit_id})`),
          },
        ],
      };
    },
  };
}
