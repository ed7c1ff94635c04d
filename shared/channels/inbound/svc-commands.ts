import { createHash } from "node:crypto";
import { type Role, roleRank } from "../../auth/roles.js";
import type { TurnHooks } from "../../console/coordinator/coordinator.js";
import type { ApprovalService } from "../../console/approvals/approval-service.js";
import { effectiveRole } from "../../console/tools/tool.js";
import type { ActionTypeCatalog } from "../../ops/actions/action-types.js";
import type { AuditLog } from "../../ops/audit.js";
import type { KillSwitch } from "../../ops/kill-switch.js";
import type { RuleCatalog } from "../../ops/rules/rule-catalog.js";
import { scanSecrets } from "../../ops/secret-scanner.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { DraftProposal, DraftPullRequest, GitDraftPublisher } from "./git-drafts.js";
import type { SvcHandler } from "./pipeline.js";
import type { ChannelOutboundResponse } from "./types.js";

/**
 * The A3 chat commands (spec operator-console.md §5 table and item 10; ledger C-412–C-423):
 *
 * | Command | Floor |
 * |---|---|
 * | status, shadow-report, kpi, override list, exemption list, kill-switch status | Reader |
 * | override draft, exemption draft, assignment param-tune | Contributor |
 * | kill-switch on / off | Owner (plus an A1 approval) |
 *
 * The invoker's role (from the directory, by its object id) is checked against the command's
 * floor before the handler runs; a missing role is a `403` reply in the channel and a `denied`
 * audit entry. Writes create a draft only — a record carrying the invoker's object id in its
 * trailer (`Requested-by: <oid>`), listed by `override list` / `exemption list` — and never change
 * the live catalog. Where a Git host is configured (`git-drafts.ts`), the draft also becomes a DRAFT
 * pull request that changes only its proposal file on a new branch, the trailer in its commit; a
 * Git host failure keeps the record and the reply says so. `kill-switch on|off` files the draft
 * and an A1 approval through the existing approval service; the switch flips only when a separate
 * approver decides it.
 */

export const CHANNEL_DRAFTS_TABLE = "channeldrafts";

export type DraftKind = "override" | "exemption" | "param_tune" | "kill_switch";

/** A drafted change: a proposal record (the proposal file's fields), never applied by the channel. */
export interface Draft extends DraftProposal {
  kind: DraftKind;
  /** The draft pull request on the configured Git host. */
  pull_request?: DraftPullRequest;
  /** Why the Git host did not open one (`http_<status>`, `unreachable`, `timeout`). */
  git_failure?: string;
}

export interface SvcDependencies {
  tables: TableSource;
  audit: AuditLog;
  killSwitch: KillSwitch;
  approvals: Pick<ApprovalService, "request">;
  /** Open approvals (only counted for Readers). */
  pendingApprovals(): Promise<number>;
  actionTypes: ActionTypeCatalog;
  rules: RuleCatalog;
  modeOf(actionType: string): "shadow" | "enforce";
  hooks?: TurnHooks;
  /** Opens a draft pull request per draft (a Git host is configured); without it drafts stay records. */
  git?: GitDraftPublisher;
}

interface Command {
  name: string;
  floor: Role;
  /** Words after the command name. */
  run(ctx: {
    words: string[];
    oid: string;
    name: string;
    requestId: string;
    /** The turn's vendor identity (`<channel>/<vendor message id>`): a retried turn drafts the same id. */
    turnKey: string;
    now: Date;
    hooks: TurnHooks | undefined;
  }): Promise<{
    text: string;
    approval_id?: string;
    audit?: Record<string, unknown>;
  }>;
}

/**
 * The draft's id, from the turn's vendor identity (not the attempt's request id): a turn the
 * channel queue runs again (its first attempt failed after the Git host opened the pull request)
 * finds the same record, branch and pull request instead of opening a second one.
 */
const draftIdOf = (kind: DraftKind, oid: string, params: Record<string, string>, turnKey: string) =>
  `drf_${createHash("sha256")
    .update(JSON.stringify([kind, oid, params, turnKey]))
    .digest("hex")
    .slice(0, 20)}`;

/** `key=value` words into a bounded record; other words are ignored. */
function keyValues(words: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const word of words.slice(0, 10)) {
    const m = /^([a-z_]{1,32})=(.{1,200})$/.exec(word);
    if (m?.[1] && m[2]) out[m[1]] = scanSecrets(m[2]).text;
  }
  return out;
}

/** Builds the `/svc` handler for the pipeline. */
export function createSvcCommands(deps: SvcDependencies): SvcHandler & { drafts(kind?: DraftKind): Promise<Draft[]> } {
  const table = tableOpener(deps.tables, CHANNEL_DRAFTS_TABLE);

  async function listDrafts(kind?: DraftKind): Promise<Draft[]> {
    const out: Draft[] = [];
    for await (const row of (await table()).listEntities<{ doc: string }>(
      kind ? { queryOptions: { filter: `PartitionKey eq '${kind}'` } } : {},
    )) {
      const draft = JSON.parse(row.doc) as Draft;
      if (!kind || draft.kind === kind) out.push(draft);
    }
    return out.sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  /** Saves the record; answers the one a previous attempt of the same turn saved, if any. */
  async function saveDraft(draft: Draft): Promise<Draft | undefined> {
    try {
      await (await table()).createEntity({
        partitionKey: draft.kind,
        rowKey: draft.draft_id,
        doc: JSON.stringify(draft),
      });
      return undefined;
    } catch (error) {
      if (!isStatus(error, 409)) throw error;
      return JSON.parse((await (await table()).getEntity<{ doc: string }>(draft.kind, draft.draft_id)).doc) as Draft;
    }
  }

  /**
   * The record is saved first; then, with a Git host, the draft pull request, and the record
   * learns its number (or why there is none). Answers the reply's sentence about it.
   */
  async function fileDraft(draft: Draft): Promise<{ text: string; audit: Record<string, unknown> }> {
    const earlier = await saveDraft(draft);
    if (!deps.git) return { text: "", audit: {} };
    // A retried turn whose first attempt recorded its pull request does not ask the host again.
    const outcome: Awaited<ReturnType<GitDraftPublisher>> = earlier?.pull_request
      ? { status: "opened", pull_request: earlier.pull_request }
      : await deps.git(earlier ? { ...draft, created_at: earlier.created_at } : draft);
    const updated: Draft =
      outcome.status === "opened"
        ? { ...draft, pull_request: outcome.pull_request }
        : { ...draft, git_failure: outcome.reason };
    await (await table()).upsertEntity(
      { partitionKey: draft.kind, rowKey: draft.draft_id, doc: JSON.stringify(updated) },
      "Replace",
    );
    return outcome.status === "opened"
      ? {
          text: ` Draft pull request #${outcome.pull_request.number} opened on branch ${outcome.pull_request.branch}${outcome.pull_request.url ? `: ${outcome.pull_request.url}` : ""}.`,
          audit: { pull_request: outcome.pull_request.number, branch: outcome.pull_request.branch },
        }
      : {
          text: ` The Git host could not open its draft pull request (${outcome.reason}); the draft is kept as a record here.`,
          audit: { git_failure: outcome.reason },
        };
  }

  function draftOf(
    kind: DraftKind,
    summary: string,
    params: Record<string, string>,
    oid: string,
    turnKey: string,
    now: Date,
  ): Draft {
    return {
      draft_id: draftIdOf(kind, oid, params, turnKey),
      kind,
      summary,
      params,
      trailer: `Requested-by: ${oid}`,
      requested_by: oid,
      created_at: now.toISOString(),
    };
  }

  const ruleIds = new Set(deps.rules.rules.map((r) => r.id));
  const actionIds = new Set(deps.actionTypes.action_types.map((a) => a.id));

  const writeDraft =
    (
      kind: Exclude<DraftKind, "kill_switch">,
      label: string,
      check: (p: Record<string, string>) => string | undefined,
    ): Command["run"] =>
    async ({ words, oid, turnKey, now }) => {
      const params = keyValues(words);
      const problem = check(params);
      if (problem) return { text: `${label}: ${problem}. Nothing was drafted.`, audit: { refused: problem } };
      const draft = draftOf(kind, label, params, oid, turnKey, now);
      const filed = await fileDraft(draft);
      return {
        text: `Draft ${draft.draft_id} created (${label}); it changes nothing until it is reviewed and merged. Trailer: ${draft.trailer}${filed.text}`,
        audit: { draft_id: draft.draft_id, kind, ...filed.audit },
      };
    };

  const killSwitchWrite =
    (on: boolean): Command["run"] =>
    async ({ oid, name, requestId, turnKey, now, hooks }) => {
      const params = { on: String(on) };
      const draft = draftOf("kill_switch", `kill-switch ${on ? "on" : "off"}`, params, oid, turnKey, now);
      const item = await deps.approvals.request({
        action: { action_type: "kill_switch", target: "control_plane", params: { on } },
        requester: { oid, name },
        reason: "approval_required",
        severity: "high",
        idempotencyKey: `svc/${draft.draft_id}`,
        requestId,
        now,
      });
      const filed = await fileDraft({ ...draft, approval_id: item.approval_id });
      await hooks?.approvalFiled?.(item.approval_id, requestId);
      return {
        text: `Draft ${draft.draft_id} and approval ${item.approval_id} filed: the kill switch turns ${on ? "on" : "off"} only when a separate approver decides it in the console. Trailer: ${draft.trailer}${filed.text}`,
        approval_id: item.approval_id,
        audit: { draft_id: draft.draft_id, approval_id: item.approval_id, ...filed.audit },
      };
    };

  const list =
    (kind: DraftKind, label: string): Command["run"] =>
    async () => {
      const drafts = await listDrafts(kind);
      return {
        text:
          drafts.length === 0
            ? `No ${label} drafts.`
            : `${drafts.length} ${label} draft(s):\n${drafts
                .slice(-20)
                .map(
                  (d) =>
                    `${d.draft_id} ${d.created_at} ${Object.entries(d.params)
                      .map(([k, v]) => `${k}=${v}`)
                      .join(" ")} (${d.trailer})${d.pull_request ? ` PR #${d.pull_request.number}` : ""}`,
                )
                .join("\n")}`,
      };
    };

  const commands: Command[] = [
    {
      name: "status",
      floor: "Reader",
      run: async () => {
        const ks = await deps.killSwitch.status();
        return {
          text: `Kill switch: ${ks.on ? "ON" : "off"}. Pending approvals: ${await deps.pendingApprovals()}. Open drafts: ${(await listDrafts()).length}.`,
        };
      },
    },
    {
      name: "shadow-report",
      floor: "Reader",
      run: async () => ({
        text: `Action modes:\n${deps.actionTypes.action_types.map((a) => `${a.id}: ${deps.modeOf(a.id)}`).join("\n")}`,
      }),
    },
    {
      name: "kpi",
      floor: "Reader",
      run: async ({ now }) => {
        const since = new Date(now.getTime() - 86_400_000);
        const entries = await deps.audit.list({ since, limit: 1000 });
        const by = (o: string) => entries.filter((e) => e.outcome === o).length;
        return {
          text: `Last 24 hours: ${entries.length} audited acts (${by("succeeded")} succeeded, ${by("denied")} denied, ${by("failed")} failed)${entries.length === 1000 ? " — at least; the count stops at 1000" : ""}.`,
        };
      },
    },
    { name: "override list", floor: "Reader", run: list("override", "override") },
    { name: "exemption list", floor: "Reader", run: list("exemption", "exemption") },
    {
      name: "kill-switch status",
      floor: "Reader",
      run: async () => {
        const ks = await deps.killSwitch.status();
        return { text: `Kill switch: ${ks.on ? "ON" : "off"}${ks.set_at ? ` (last set ${ks.set_at})` : ""}.` };
      },
    },
    {
      name: "override draft",
      floor: "Contributor",
      run: writeDraft("override", "override draft", (p) =>
        !p.rule || !ruleIds.has(p.rule)
          ? "give rule=<rule id> (a rule of the catalog)"
          : !p.mode || !["shadow", "enforce"].includes(p.mode)
            ? "give mode=shadow|enforce"
            : undefined,
      ),
    },
    {
      name: "exemption draft",
      floor: "Contributor",
      run: writeDraft("exemption", "exemption draft", (p) =>
        !p.rule || !ruleIds.has(p.rule)
          ? "give rule=<rule id> (a rule of the catalog)"
          : !p.target
            ? "give target=<resource>"
            : !p.until || Number.isNaN(Date.parse(p.until))
              ? "give until=<RFC 3339 time>"
              : undefined,
      ),
    },
    {
      name: "assignment param-tune",
      floor: "Contributor",
      run: writeDraft("param_tune", "assignment param-tune", (p) =>
        !p.action || !actionIds.has(p.action)
          ? "give action=<action type> (an action type of the catalog)"
          : Object.keys(p).length < 2
            ? "give at least one parameter key=value"
            : undefined,
      ),
    },
    { name: "kill-switch on", floor: "Owner", run: killSwitchWrite(true) },
    { name: "kill-switch off", floor: "Owner", run: killSwitchWrite(false) },
  ];
  // Longest names first, so "kill-switch status" is not read as "kill-switch".
  const byLength = [...commands].sort((a, b) => b.name.length - a.name.length);

  const handler: SvcHandler = async ({ caller, turn, args, requestId, now, hooks }) => {
    const words = args.split(/\s+/).filter(Boolean);
    const lower = words.map((w) => w.toLowerCase());
    const command = byLength.find((c) => {
      const parts = c.name.split(" ");
      return parts.every((p, i) => lower[i] === p);
    });
    const actor = { oid: caller.oid, name: caller.name };
    const reply = (text: string, kind: string, audit_ids: string[], approval_id?: string): ChannelOutboundResponse => ({
      text,
      thread_intent: "in_thread",
      mentions: [],
      kind,
      request_id: requestId,
      audit_ids,
      ...(approval_id ? { rich: { kind: "approval_request" as const, approval_id } } : {}),
    });
    if (!command)
      return reply(
        `Unknown /svc command. Commands: ${commands.map((c) => `${c.name} (${c.floor})`).join(", ")}.`,
        "invalid_command",
        [],
      );
    const role = effectiveRole(caller);
    // The role check precedes the handler: a refused command has no side effect (C-412).
    if (!role || roleRank(role) < roleRank(command.floor)) {
      const entry = await deps.audit.record({
        actor,
        action: "channel.svc_command",
        target: command.name,
        outcome: "denied",
        request_id: requestId,
        details: { required_role: command.floor, role: role ?? "none", status: 403 },
      });
      return reply(
        `403 Forbidden: /svc ${command.name} needs the ${command.floor} role; your role is ${role ?? "none"}. Nothing was run.`,
        "forbidden",
        [entry.audit_id],
      );
    }
    const result = await command.run({
      words: words.slice(command.name.split(" ").length),
      oid: caller.oid,
      name: caller.name,
      requestId,
      turnKey: `${turn.channel}/${turn.turn_id}`,
      now,
      hooks: hooks ?? deps.hooks,
    });
    const entry = await deps.audit.record({
      actor,
      action: "channel.svc_command",
      target: command.name,
      outcome: "succeeded",
      request_id: requestId,
      details: { role, ...result.audit },
      visibility_floor: command.floor,
    });
    return reply(result.text, "svc", [entry.audit_id], result.approval_id);
  };
  return Object.assign(handler, { drafts: listDrafts });
}
