import { useEffect, useState } from "preact/hooks";
import {
  type ApiClient,
  ApiError,
  type ApprovalDecisionRequest,
  type ChatReply,
  type PendingApproval,
} from "../api.js";
import type { Auth } from "../auth.js";
import { formatTime } from "../format.js";
import { ErrorNotice, useApp, useAsync, usePolling } from "../ui.js";

/** How often the queue is read again while the page is open (a decision elsewhere removes an item). */
const QUEUE_REFRESH_MS = 15_000;

/** The break-glass expiries offered: the spec's cap is 4 hours (14,400 s). */
const EXPIRIES = [
  { seconds: 3600, label: "1 hour" },
  { seconds: 7200, label: "2 hours" },
  { seconds: 14_400, label: "4 hours (the maximum)" },
] as const;

/** A canonical command's quoted value (the verb parser reads it back with JSON). */
const quoted = (text: string) => JSON.stringify(text);

/** What a decision or break-glass reply says, as one line: the server's own words for a refusal. */
function outcomeOf(reply: ChatReply): { ok: boolean; data?: Record<string, unknown>; text: string } {
  const result = reply.tool_results[0];
  if (reply.kind === "tool_result" && result?.status === "ok")
    return { ok: true, data: result.data as Record<string, unknown>, text: reply.text };
  return { ok: false, text: reply.text };
}

/** Where a decision waits while its decider signs in again (the page reloads on the way back). */
const PENDING_DECISION_KEY = "blastplane.pending-decision";

interface PendingDecision extends ApprovalDecisionRequest {
  approval_id: string;
  /** Matches the `state` the re-authentication comes back with: only that sign-in sends it. */
  nonce: string;
}

/**
 * A decision re-authenticates (spec §5 item 5): the decision waits in session storage while the
 * user signs in again with `prompt=login`; {@link resumeDecision} sends it with that sign-in's
 * fresh token when the page comes back.
 */
async function decideWithReauthentication(auth: Auth, pending: Omit<PendingDecision, "nonce">): Promise<void> {
  const nonce = crypto.randomUUID();
  sessionStorage.setItem(PENDING_DECISION_KEY, JSON.stringify({ ...pending, nonce }));
  await auth.reauthenticate(nonce);
}

/** Sends the decision a re-authentication was for, once, with its fresh token; undefined when there is none. */
async function resumeDecision(
  api: ApiClient,
  auth: Auth,
): Promise<{ approvalId: string; outcome: { ok: boolean; text: string } } | undefined> {
  const fresh = auth.takeReauthentication();
  const stored = sessionStorage.getItem(PENDING_DECISION_KEY);
  if (!fresh || !stored) return undefined;
  sessionStorage.removeItem(PENDING_DECISION_KEY);
  let pending: PendingDecision;
  try {
    pending = JSON.parse(stored) as PendingDecision;
  } catch {
    return undefined;
  }
  if (pending.nonce !== fresh.state) return undefined;
  const { approval_id: approvalId, decision, justification, action_hash } = pending;
  try {
    const recorded = await api.decideApproval(approvalId, { decision, justification, action_hash }, fresh.accessToken);
    const verb = decision === "approve" ? "Approved" : "Rejected";
    return {
      approvalId,
      outcome:
        recorded.outcome === "timeout"
          ? { ok: false, text: "Not decided: the approval had already timed out." }
          : { ok: true, text: `${verb}: the decision is recorded (state ${recorded.state}).` },
    };
  } catch (error) {
    const text =
      error instanceof ApiError ? `Not decided: ${String(error.message)}` : "Not decided: the request failed.";
    return { approvalId, outcome: { ok: false, text } };
  }
}

/**
 * The approvals queue (spec §2.2, §5 item 3): Readers see only how many approvals wait; Approvers
 * and Owners see each item and decide those the server says they may (never their own). A
 * decision signs the user in again (`prompt=login`), then makes the authenticated round trip with
 * that fresh token and the item's `action_hash`; what it records (or why it refuses) is the
 * server's answer, shown as such.
 */
export function ApprovalsQueue() {
  const { api, auth } = useApp();
  const queue = useAsync((signal) => api.approvals(signal), []);
  usePolling(async () => queue.reload(), QUEUE_REFRESH_MS);
  const [outcomes, setOutcomes] = useState<Record<string, { ok: boolean; text: string }>>({});
  // Back from a re-authentication: send the decision it was for.
  useEffect(() => {
    void resumeDecision(api, auth).then((resumed) => {
      if (!resumed) return;
      setOutcomes((all) => ({ ...all, [resumed.approvalId]: resumed.outcome }));
      queue.reload();
    });
  }, []);
  const data = queue.data;
  return (
    <section class="approvals" aria-labelledby="approvals-heading">
      <h2 id="approvals-heading">Approvals</h2>
      <ErrorNotice error={queue.error} />
      {data ? (
        <p class="approvals-count" data-testid="approvals-count">
          {data.count === 0
            ? "No approvals are waiting."
            : `${data.count} ${data.count === 1 ? "approval is" : "approvals are"} waiting for a decision.`}
          {data.details === "count_only" && data.count > 0 ? " Approvers see the details and decide them." : null}{" "}
          <button type="button" onClick={() => queue.reload()}>
            Refresh
          </button>
        </p>
      ) : null}
      {Object.entries(outcomes).map(([id, outcome]) => (
        <p key={id} class={`notice ${outcome.ok ? "notice-ok" : "notice-error"}`} role="status">
          {id}: {outcome.text}
        </p>
      ))}
      {data?.items.length ? (
        <ul class="approval-items">
          {data.items.map((item) => (
            <ApprovalItem key={item.approval_id} item={item} />
          ))}
        </ul>
      ) : null}
    </section>
  );
}

function ApprovalItem(props: { item: PendingApproval }) {
  const { auth } = useApp();
  const { item } = props;
  const [justification, setJustification] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const inputId = `justify-${item.approval_id}`;

  async function decide(decision: "approve" | "reject") {
    setBusy(true);
    setError(undefined);
    try {
      await decideWithReauthentication(auth, {
        approval_id: item.approval_id,
        decision,
        justification: justification.trim(),
        action_hash: item.action_hash,
      });
    } catch (e) {
      setError(e);
      setBusy(false);
    }
  }

  return (
    <li class="approval-item" data-approval-id={item.approval_id}>
      <p>
        <strong>{item.proposed_action}</strong> on <code>{item.target}</code> <span class="badge">{item.severity}</span>
      </p>
      <p class="approval-meta">
        Requested by {item.requester.name || item.requester.oid} ({item.reason.replaceAll("_", " ")}), expires{" "}
        {formatTime(item.expires_at)}.
      </p>
      {item.may_decide ? (
        <form
          class="approval-decision"
          onSubmit={(event) => {
            event.preventDefault();
          }}
        >
          <label for={inputId}>Justification for {item.approval_id}</label>
          <input
            id={inputId}
            type="text"
            maxLength={500}
            value={justification}
            onInput={(event) => setJustification((event.target as HTMLInputElement).value)}
          />
          <p class="approval-reauth">
            Deciding asks you to sign in again first; the decision is sent with that sign-in.
          </p>
          <div class="actions">
            <button
              type="button"
              class="primary"
              disabled={busy || justification.trim().length < 3}
              onClick={() => void decide("approve")}
            >
              Approve
            </button>
            <button
              type="button"
              disabled={busy || justification.trim().length < 3}
              onClick={() => void decide("reject")}
            >
              Reject
            </button>
          </div>
        </form>
      ) : (
        <p class="approval-not-yours">
          {item.refusal === "no_self_approval"
            ? "You requested this approval: another approver must decide it."
            : `Deciding it needs the ${item.required_role} role.`}
        </p>
      )}
      <ErrorNotice error={error} />
    </li>
  );
}

/**
 * Break-glass (spec §2.3, §8): a reason and an expiry of at most 4 hours; the server pages every
 * configured Owner and audits it, or denies it when no page is confirmed. It grants no role: the
 * result shows when it expires and who was paged.
 */
export function BreakGlass() {
  const { api } = useApp();
  const [reason, setReason] = useState("");
  const [expiry, setExpiry] = useState<number>(EXPIRIES[0].seconds);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [result, setResult] = useState<{ ok: boolean; text: string } | undefined>(undefined);

  async function request() {
    setBusy(true);
    setError(undefined);
    setResult(undefined);
    try {
      const outcome = outcomeOf(
        await api.chat(`activate_break_glass reason=${quoted(reason.trim())} expiry=${expiry}`),
      );
      if (!outcome.ok) setResult({ ok: false, text: outcome.text });
      else {
        const d = outcome.data as {
          expires_at: string;
          activated_at: string;
          pager_receipt: { paged: number; confirmed: number };
          audit_id: string;
        };
        const ttlSeconds = Math.round((Date.parse(d.expires_at) - Date.parse(d.activated_at)) / 1000);
        setResult({
          ok: true,
          text: `Break-glass recorded until ${formatTime(d.expires_at)} (TTL ${ttlSeconds / 3600} h, ${ttlSeconds} s). Owners paged: ${d.pager_receipt.confirmed} of ${d.pager_receipt.paged} confirmed. Audit entry ${d.audit_id}. No role was granted.`,
        });
      }
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  }

  return (
    <section class="break-glass" aria-labelledby="break-glass-heading">
      <h2 id="break-glass-heading">Break-glass</h2>
      <p>
        In an emergency, page every Owner with your reason. It is audited, expires after at most 4 hours and grants no
        role.
      </p>
      <form
        class="console-form"
        onSubmit={(event) => {
          event.preventDefault();
          if (reason.trim().length >= 10 && !busy) void request();
        }}
      >
        <label for="break-glass-reason">Reason for break-glass</label>
        <textarea
          id="break-glass-reason"
          rows={2}
          maxLength={1000}
          value={reason}
          onInput={(event) => setReason((event.target as HTMLTextAreaElement).value)}
        />
        <label for="break-glass-expiry">Expires after</label>
        <select
          id="break-glass-expiry"
          value={String(expiry)}
          onChange={(event) => setExpiry(Number((event.target as HTMLSelectElement).value))}
        >
          {EXPIRIES.map((e) => (
            <option key={e.seconds} value={String(e.seconds)}>
              {e.label}
            </option>
          ))}
        </select>
        <div class="actions">
          <button type="submit" disabled={busy || reason.trim().length < 10}>
            Request break-glass
          </button>
        </div>
      </form>
      {result ? (
        <p class={`notice ${result.ok ? "notice-ok" : "notice-error"}`} role="status" data-testid="break-glass-result">
          {result.text}
        </p>
      ) : null}
      <ErrorNotice error={error} />
    </section>
  );
}
