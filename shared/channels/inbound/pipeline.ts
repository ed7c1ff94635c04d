import { randomUUID } from "node:crypto";
import type { Caller, Role } from "../../auth/roles.js";
import type { OutboundResponse, TurnHooks } from "../../console/coordinator/coordinator.js";
import type { ToolResult } from "../../console/tools/tool.js";
import { leadingVerb } from "../../console/coordinator/verb-parser.js";
import type { AuditLog } from "../../ops/audit.js";
import { scanSecrets } from "../../ops/secret-scanner.js";
import type { AttachmentEvidence, GateOutcome } from "./attachment-gate.js";
import { activitiesOf } from "./activities.js";
import { type ChannelProgressSender, createProgressStream } from "./progress-stream.js";
import {
  CHANNEL_TRUNCATED,
  type ChannelDeliveryReceipt,
  type ChannelInboundTurn,
  type ChannelKind,
  type ChannelOutboundResponse,
  type ChannelProgressUpdate,
} from "./types.js";

/**
 * The one entry of the inbound conversation path: sender access → (the `/svc` commands or) the
 * existing coordinator → the reply through the adapter. Every channel (Teams, Slack) calls this
 * with a {@link ChannelInboundTurn}; the channel queue's worker calls it for each accepted turn.
 *
 * Nothing here judges: the coordinator applies its rules and RBAC, the approval service and
 * `shared/console/approvals/authority.ts` decide approvals, the `/svc` handler checks its role
 * table. The pipeline only resolves who is speaking, keeps unknown senders away from the
 * coordinator (spec §5 item 8) and routes A1 decisions to the path the channel's trust allows
 * (spec §5 items 4–6).
 */

/** The principal a resolved sender speaks as. */
export interface ResolvedPrincipal {
  /** The canonical directory object id (from a binding or a pairing). */
  oid: string;
  tenant_id: string;
}

/** Sender access's answer for one turn (spec §5 item 8). */
export type AccessDecision =
  | { status: "resolved"; principal: ResolvedPrincipal }
  /** Never reaches the coordinator; `reply` is what the sender is told (none: stay silent). */
  | {
      status: "refused";
      reason: "channel_disabled" | "unknown_sender" | "pairing_pending" | "pairing_full";
      reply?: string;
    }
  /**
   * A pairing challenge was issued: `reply` carries the one-time code; when the reply is not
   * delivered, {@link SenderAccess.discardChallenge} removes it (spec §3: capacity freed).
   */
  | { status: "challenge"; reply: string; expires_at: string; challenge_id: string };

/** Resolves a turn's sender to a principal (bindings, allow-list, pairing). */
export interface SenderAccess {
  resolve(turn: ChannelInboundTurn, now: Date): Promise<AccessDecision>;
  /** Deletes an issued challenge whose reply could not be delivered. */
  discardChallenge(channel: ChannelKind, challengeId: string): Promise<void>;
}

/** The application roles of a principal (the directory's app-role assignments). */
export interface PrincipalDirectory {
  /** The principal's display name and roles; undefined when the directory does not know it. */
  lookup(oid: string): Promise<{ name: string; roles: Role[] } | undefined>;
}

/** The `/svc` commands (A3): the handler checks the command's role itself before it runs. */
export type SvcHandler = (input: {
  caller: Caller;
  turn: ChannelInboundTurn;
  /** The text after `/svc`. */
  args: string;
  requestId: string;
  now: Date;
  /** The approval orchestration's hooks of this turn (a kill-switch draft files an approval). */
  hooks?: TurnHooks;
}) => Promise<ChannelOutboundResponse>;

/** The coordinator as the pipeline uses it (`createCoordinator(...)` satisfies it). */
export interface TurnCoordinator {
  handleTurn(
    caller: Caller,
    /** The typed text, and the gated attachments' evidence (never their content as text). */
    inbound: { text: string; attachments?: readonly AttachmentEvidence[] },
    requestId?: string,
    hooks?: TurnHooks,
  ): Promise<OutboundResponse>;
}

export interface InboundPipelineDependencies {
  access: SenderAccess;
  directory: PrincipalDirectory;
  coordinator: TurnCoordinator;
  /** The `/svc` commands; without it a `/svc` turn is answered as unavailable. */
  svc?: SvcHandler;
  audit: AuditLog;
  /** Posts a reply for the turn through the channel's vendor client; returns its acknowledgement. */
  deliver(turn: ChannelInboundTurn, response: ChannelOutboundResponse): Promise<ChannelDeliveryReceipt>;
  /** The approval orchestration's hooks (as `POST /api/chat` passes them). */
  hooks?: TurnHooks;
  /** The console's origin: an A1 decision from chat platform B bounces to `<origin>/approvals/<id>`. */
  consoleBaseUrl?: string;
  /**
   * The attachment gate (`attachment-gate.ts`): only admitted attachments reach the coordinator,
   * as evidence. Without it a turn's attachments are not used (nothing is fetched).
   */
  attachments?: (refs: ChannelInboundTurn["attachments"]) => Promise<GateOutcome[]>;
  /**
   * The channel's progress transport (`progress-stream.ts`): a coordinator turn's activities are
   * posted as cumulative revisions of one message, which the final reply replaces. Without it the
   * reply is posted once at the end.
   */
  progress?: ChannelProgressSender;
  /** Updates after revision 0 per turn (default `PROGRESS_UPDATE_LIMIT`). */
  progressLimit?: number;
  /** How long a turn runs before its progress is shown (default `PROGRESS_START_AFTER_MS`; 0: at once). */
  progressStartAfterMs?: number;
  now?: () => Date;
}

/** How one turn ended. `response` is undefined when nothing was sent (a disabled channel). */
export interface InboundOutcome {
  status: "answered" | "refused" | "challenge";
  request_id: string;
  response?: ChannelOutboundResponse;
  receipt?: ChannelDeliveryReceipt;
  /** The progress revisions the channel acknowledged, in order (a coordinator turn with progress). */
  progress?: ChannelProgressUpdate[];
}

/** The text of a turn without a `/svc` prefix, or undefined when it is not a `/svc` command. */
export function svcArguments(text: string): string | undefined {
  const match = /^\s*\/svc(?:\s+([\s\S]*))?$/i.exec(text);
  return match ? (match[1] ?? "").trim() : undefined;
}

/** A channel reply from the coordinator's reply. */
export function channelReplyOf(reply: OutboundResponse, at: string): ChannelOutboundResponse {
  const { activities, clipped } = activitiesOf(reply.tool_results, at);
  return {
    text: scanSecrets(reply.text).text + (clipped ? `\n${CHANNEL_TRUNCATED}` : ""),
    thread_intent: "in_thread",
    ...(reply.approval_id ? { rich: { kind: "approval_request" as const, approval_id: reply.approval_id } } : {}),
    mentions: [],
    ...(activities.length > 0 ? { activities } : {}),
    upstream_truncated: reply.text.includes("[OUTPUT TRUNCATED]"),
    kind: reply.kind,
    request_id: reply.request_id,
    audit_ids: reply.audit_ids,
  };
}

const plain = (requestId: string, kind: string, text: string, audit_ids: string[] = []): ChannelOutboundResponse => ({
  text,
  thread_intent: "in_thread",
  mentions: [],
  kind,
  request_id: requestId,
  audit_ids,
});

export { activitiesOf };

const APPROVAL_ID = /\bapproval_id\s*=\s*"?(apr_[0-9a-f]{24})\b/;

/**
 * Builds the pipeline's entry point: `handleInboundTurn(deps)(turn)` runs sender access, then the
 * `/svc` handler or the coordinator, then delivers the reply. The signature is stable: adapters
 * and the channel queue's worker depend on it.
 */
export function handleInboundTurn(deps: InboundPipelineDependencies) {
  const now = deps.now ?? (() => new Date());
  return async function handle(turn: ChannelInboundTurn): Promise<InboundOutcome> {
    const requestId = randomUUID();
    const at = now();
    // A throwing adapter is an unknown outcome: the post may exist (spec §3 reply delivery).
    const send = async (response: ChannelOutboundResponse): Promise<ChannelDeliveryReceipt> =>
      deps.deliver(turn, response).catch((error: unknown) => ({
        outcome: "ambiguous" as const,
        operation: "reply",
        reason: error instanceof Error ? error.message.slice(0, 200) : "failed",
      }));
    const access = await deps.access.resolve(turn, at);
    const vendorActor = { oid: `${turn.channel}:unresolved`, name: turn.channel };

    if (access.status === "refused") {
      const entry = await deps.audit.record({
        actor: vendorActor,
        action: "channel.turn_refused",
        target: turn.channel,
        outcome: "denied",
        request_id: requestId,
        details: { reason: access.reason, input: turn.input },
      });
      if (access.reply === undefined) return { status: "refused", request_id: requestId };
      const response = plain(requestId, "access_refused", access.reply, [entry.audit_id]);
      return { status: "refused", request_id: requestId, response, receipt: await send(response) };
    }

    if (access.status === "challenge") {
      const response: ChannelOutboundResponse = {
        ...plain(requestId, "pairing_challenge", access.reply),
        rich: { kind: "pairing_challenge", expires_at: access.expires_at },
      };
      const receipt = await send(response);
      // The sender never saw the code: the challenge goes, and its capacity is freed (spec §3).
      if (receipt.outcome !== "acknowledged") await deps.access.discardChallenge(turn.channel, access.challenge_id);
      return { status: "challenge", request_id: requestId, response, receipt };
    }

    const known = await deps.directory.lookup(access.principal.oid);
    const caller: Caller = {
      oid: access.principal.oid,
      name: known?.name ?? "",
      tenant_id: access.principal.tenant_id,
      roles: known?.roles ?? [],
    };
    const actor = { oid: caller.oid, name: caller.name };

    // A1 decisions follow the channel's trust (spec §5 items 4–6): only an authenticated round trip
    // (`sso`) reaches the coordinator's approve_hil; chat platform B bounces to the browser.
    if (leadingVerb(turn.text) === "approve_hil" && turn.a1 !== "sso") {
      const approvalId = APPROVAL_ID.exec(turn.text)?.[1];
      const entry = await deps.audit.record({
        actor,
        action: "channel.a1_refused",
        target: approvalId ?? turn.channel,
        outcome: "denied",
        request_id: requestId,
        details: {
          channel: turn.channel,
          a1: turn.a1,
          reason: turn.a1 === "browser" ? "reauthenticate_in_browser" : "guest_tenant",
        },
      });
      const console_url =
        approvalId && deps.consoleBaseUrl
          ? new URL(`/approvals/${approvalId}`, deps.consoleBaseUrl).toString()
          : undefined;
      const response: ChannelOutboundResponse =
        turn.a1 === "browser"
          ? {
              ...plain(
                requestId,
                "a1_bounced",
                `Approvals are not decided in this channel. Open the console to sign in and decide${console_url ? `: ${console_url}` : ""}. Nothing was decided.`,
                [entry.audit_id],
              ),
              ...(approvalId && console_url
                ? { rich: { kind: "approval_bounce" as const, approval_id: approvalId, console_url } }
                : {}),
            }
          : plain(
              requestId,
              "a1_refused",
              "Approvals cannot be decided by a guest of another tenant. Nothing was decided.",
              [entry.audit_id],
            );
      return { status: "refused", request_id: requestId, response, receipt: await send(response) };
    }

    const svcArgs = svcArguments(turn.text);
    let response: ChannelOutboundResponse;
    if (svcArgs !== undefined) {
      response = deps.svc
        ? await deps.svc({
            caller,
            turn,
            args: svcArgs,
            requestId,
            now: at,
            ...(deps.hooks ? { hooks: deps.hooks } : {}),
          })
        : plain(requestId, "unavailable", "The /svc commands are not available in this deployment.");
    } else {
      // Attachments pass the gate first; a blocked one never reaches a tool (spec §5 item 6′).
      const gated = deps.attachments && turn.attachments.length > 0 ? await deps.attachments(turn.attachments) : [];
      const admitted: AttachmentEvidence[] = [];
      const refused: string[] = [];
      for (const outcome of gated) {
        if (outcome.status === "admitted") {
          admitted.push(outcome.evidence);
          continue;
        }
        await deps.audit.record({
          actor,
          action: "channel.attachment_blocked",
          target: outcome.vendor_id.slice(0, 200),
          outcome: "denied",
          request_id: requestId,
          details: {
            channel: turn.channel,
            reason: outcome.reason,
            ...(outcome.detail ? { detail: outcome.detail } : {}),
          },
        });
        refused.push(`${outcome.name.slice(0, 100)} (${outcome.reason}${outcome.detail ? `: ${outcome.detail}` : ""})`);
      }
      const stream = deps.progress
        ? createProgressStream({
            sender: deps.progress,
            turn,
            ...(deps.progressLimit !== undefined ? { limit: deps.progressLimit } : {}),
            ...(deps.progressStartAfterMs !== undefined ? { startAfterMs: deps.progressStartAfterMs } : {}),
            now,
          })
        : undefined;
      const outer = deps.hooks;
      const hooks = stream
        ? {
            ...outer,
            onToolResult: (result: ToolResult) => {
              outer?.onToolResult?.(result);
              stream.activity(result);
            },
            onDelta: (text: string) => {
              outer?.onDelta?.(text);
              stream.composing();
            },
          }
        : outer;
      // The coordinator gets what the sender typed; attachments only as evidence, never as text.
      const reply = await deps.coordinator
        .handleTurn(
          caller,
          { text: turn.text, ...(admitted.length > 0 ? { attachments: admitted } : {}) },
          requestId,
          hooks,
        )
        .catch(async (error: unknown) => {
          // A progress message already shown says that this attempt failed (never "Working on it…" forever).
          await stream?.cancel();
          throw error;
        });
      response = channelReplyOf(reply, at.toISOString());
      if (refused.length > 0)
        // The names are the sender's: scanned like the reply's text before they are echoed.
        response = {
          ...response,
          text: `${response.text}\n${scanSecrets(`Attachments not used: ${refused.join(", ")}.`).text}`,
        };
      if (stream) {
        const { receipt, revisions } = await stream.finish(response, send);
        return { status: "answered", request_id: requestId, response, receipt, progress: revisions };
      }
    }
    return { status: "answered", request_id: requestId, response, receipt: await send(response) };
  };
}

export type InboundTurnHandler = ReturnType<typeof handleInboundTurn>;
