import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError } from "../api.js";
import { followLive, notificationsEnabled, optIn, optOut } from "../live-notifications.js";
import type { LiveFrameView } from "../notify-ledger.js";
import { readSse } from "../sse.js";
import { PageTitle, useApp } from "../ui.js";
import { ApprovalsQueue, BreakGlass } from "./console-approvals.js";

/** One tool result's activity as the stream reports it. */
interface Activity {
  index: number;
  tool: string;
  status: string;
  evidence_ref?: string;
  observed_at?: string;
}

/** The reply of a turn (the `answer` frame: what `POST /api/chat` returns). */
interface Answer {
  text: string;
  kind: string;
  evidence_refs: string[];
  audit_ids: string[];
  approval_id?: string;
}

interface Turn {
  id: number;
  question: string;
  state: "streaming" | "done" | "cancelled" | "failed";
  /** A narrator's provisional text, until the answer replaces it. */
  provisional: string;
  activities: Activity[];
  answer?: Answer;
  planSource?: string;
  error?: string;
}

/** How each deterministic answer kind is labelled, so refusals and abstentions read as such. */
const KIND_LABEL: Record<string, string> = {
  tool_result: "Answer from tool evidence",
  refused: "Refused",
  blocked: "Blocked",
  glossary: "Glossary",
  action_context_abstention: "Abstained: needs the exact action",
  lifecycle_abstention: "Abstained: needs lifecycle evidence",
  reasoning_unavailable: "Reasoning layer unavailable",
  approval_filed: "Filed for approval",
  invalid_command: "Invalid command",
};

/**
 * The console: a conversation over `POST /api/chat/stream`, the opt-in for browser notifications,
 * the approvals queue (count for Readers, decisions for Approvers) and break-glass.
 */
export function ConsolePage() {
  const { api, caller } = useApp();
  const [turns, setTurns] = useState<Turn[]>([]);
  const [text, setText] = useState("");
  const active = useRef<AbortController | undefined>(undefined);
  const nextId = useRef(1);

  const update = (id: number, change: (turn: Turn) => Turn) =>
    setTurns((all) => all.map((t) => (t.id === id ? change(t) : t)));

  async function ask(question: string) {
    const id = nextId.current++;
    const controller = new AbortController();
    active.current = controller;
    setTurns((all) => [...all, { id, question, state: "streaming", provisional: "", activities: [] }]);
    try {
      const body = await api.chatStream(question, controller.signal);
      await readSse(
        body,
        (message) => {
          const data = JSON.parse(message.data) as Record<string, unknown>;
          if (message.event === "delta")
            update(id, (t) => ({ ...t, provisional: t.provisional + String(data.text ?? "") }));
          else if (message.event === "activity")
            update(id, (t) => ({ ...t, activities: [...t.activities, data as unknown as Activity] }));
          else if (message.event === "answer")
            update(id, (t) => ({ ...t, provisional: "", answer: data as unknown as Answer }));
          else if (message.event === "final")
            update(id, (t) => ({ ...t, state: "done", planSource: String(data.plan_source ?? "") }));
          else if (message.event === "error")
            update(id, (t) => ({ ...t, state: "failed", error: String(data.detail ?? "the turn failed") }));
        },
        controller.signal,
      );
      update(id, (t) =>
        t.state === "streaming" ? { ...t, state: controller.signal.aborted ? "cancelled" : "failed" } : t,
      );
    } catch (error) {
      update(id, (t) => ({
        ...t,
        state: controller.signal.aborted ? "cancelled" : "failed",
        error: controller.signal.aborted
          ? undefined
          : error instanceof ApiError
            ? error.message
            : "the stream broke off",
      }));
    } finally {
      if (active.current === controller) active.current = undefined;
    }
  }

  const streaming = turns.some((t) => t.state === "streaming");

  return (
    <section class="console">
      <PageTitle subtitle="Ask the operations console. Canonical commands work directly (for example search_tools or explore_catalog query=R-JOB-001); answers cite their evidence.">
        Console
      </PageTitle>
      <Notifications oid={caller.oid} />
      <ApprovalsQueue />
      <ol class="conversation" aria-label="Conversation" aria-live="polite">
        {turns.map((turn) => (
          <TurnView key={turn.id} turn={turn} />
        ))}
      </ol>
      <form
        class="console-form"
        onSubmit={(event) => {
          event.preventDefault();
          const question = text.trim();
          if (!question || streaming) return;
          setText("");
          void ask(question);
        }}
      >
        <label for="console-input">Your question or command</label>
        <textarea
          id="console-input"
          rows={2}
          maxLength={8000}
          value={text}
          onInput={(event) => setText((event.target as HTMLTextAreaElement).value)}
        />
        <div class="actions">
          <button type="submit" class="primary" disabled={streaming || !text.trim()}>
            Send
          </button>
          {streaming ? (
            <button type="button" onClick={() => active.current?.abort()}>
              Cancel
            </button>
          ) : null}
        </div>
      </form>
      <BreakGlass />
    </section>
  );
}

function TurnView(props: { turn: Turn }) {
  const { turn } = props;
  const kind = turn.answer?.kind;
  return (
    <li class="turn" data-state={turn.state} data-plan-source={turn.planSource || undefined}>
      <p class="question">
        <span class="visually-hidden">You asked: </span>
        {turn.question}
      </p>
      {turn.provisional ? (
        <p class="answer provisional" data-testid="provisional">
          {turn.provisional}
        </p>
      ) : null}
      {turn.answer ? (
        <div class="answer" data-kind={kind}>
          <p class="answer-kind">
            <span class="badge">{KIND_LABEL[kind ?? ""] ?? kind}</span>
          </p>
          <p class="answer-text">{turn.answer.text}</p>
        </div>
      ) : null}
      {turn.activities.length ? (
        <ol class="activities" aria-label="Activity">
          {turn.activities.map((a) => (
            <li key={a.index}>
              <code>{a.tool}</code> {a.status}
              {a.evidence_ref ? (
                <>
                  {" "}
                  — evidence <code>{a.evidence_ref}</code>
                </>
              ) : null}
            </li>
          ))}
        </ol>
      ) : null}
      <p class="turn-state">
        {turn.state === "streaming" ? "Answering…" : null}
        {turn.state === "cancelled" ? "Cancelled: the stream was closed and the work stopped." : null}
        {turn.state === "failed" ? `Failed: ${turn.error ?? "the turn failed"}` : null}
      </p>
    </li>
  );
}

/** The explicit opt-in for browser notifications, and the live stream that feeds them while on. */
function Notifications(props: { oid: string }) {
  const { api } = useApp();
  const [enabled, setEnabled] = useState(() => notificationsEnabled(props.oid));
  const [recent, setRecent] = useState<LiveFrameView[]>([]);
  useEffect(() => {
    if (!enabled) return;
    const controller = new AbortController();
    void followLive(api, props.oid, controller.signal, (frame) => setRecent((all) => [frame, ...all].slice(0, 10)));
    return () => controller.abort();
  }, [enabled, props.oid]);
  const supported = typeof Notification !== "undefined";
  return (
    <div class="notifications">
      {enabled ? (
        <p>
          Browser notifications are on for approvals needed, denials and failed actions.{" "}
          <button
            type="button"
            onClick={() => {
              optOut(props.oid);
              setEnabled(false);
            }}
          >
            Turn off notifications
          </button>
        </p>
      ) : (
        <p>
          <button
            type="button"
            disabled={!supported}
            onClick={() => void optIn(props.oid).then((on) => setEnabled(on))}
          >
            Turn on browser notifications
          </button>{" "}
          {supported ? null : "This browser does not support notifications."}
        </p>
      )}
      {enabled && recent.length ? (
        <ul class="live-frames" aria-label="Recent activity">
          {recent.map((f) => (
            <li key={`${f.audit_id}-${f.kind}`}>
              {f.kind.replaceAll("_", " ")}
              {f.replay ? " (earlier)" : ""}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}
