import { FitAddon } from "@xterm/addon-fit";
import { Terminal } from "@xterm/xterm";
import "@xterm/xterm/css/xterm.css";
import { useEffect, useRef, useState } from "preact/hooks";
import type { ApiClient } from "../api.js";
import type { Auth } from "../auth.js";

/** Keystrokes and pastes go out in frames of at most this size (the job API closes a frame over 1 MiB). */
const FRAME_BYTES = 16 * 1024;
/** Stop sending while this much is still queued in the browser's socket. */
const SEND_HIGH_WATER_BYTES = 256 * 1024;

type State = { kind: "connecting" } | { kind: "open"; expiresAt: number } | { kind: "closed"; reason: string };

/**
 * The terminal itself (its own chunk: xterm is larger than the rest of the app): asks the dashboard
 * for a ticket, opens the job API's WebSocket with the ticket and the access token, and shows the
 * time left. "Reconnect" asks for a new ticket.
 */
export default function TerminalView(props: { api: ApiClient; auth: Auth; terminalUrl: string }) {
  const { api, auth, terminalUrl } = props;
  const host = useRef<HTMLDivElement>(null);
  const [state, setState] = useState<State>({ kind: "connecting" });
  const [round, setRound] = useState(0);
  const [now, setNow] = useState(Date.now());

  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);

  useEffect(() => {
    const element = host.current;
    if (!element) return;
    const term = new Terminal({ convertEol: false, cursorBlink: true, fontSize: 14, scrollback: 5000 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(element);
    fit.fit();
    let socket: WebSocket | undefined;
    let disposed = false;
    const encoder = new TextEncoder();
    const pending: Uint8Array<ArrayBuffer>[] = [];

    const flush = () => {
      while (socket && socket.readyState === WebSocket.OPEN && pending.length > 0) {
        if (socket.bufferedAmount > SEND_HIGH_WATER_BYTES) {
          setTimeout(flush, 50);
          return;
        }
        socket.send(pending.shift() as Uint8Array<ArrayBuffer>);
      }
    };
    const sendText = (text: string) => {
      const bytes = encoder.encode(text);
      for (let offset = 0; offset < bytes.length; offset += FRAME_BYTES)
        pending.push(bytes.subarray(offset, offset + FRAME_BYTES));
      flush();
    };
    const sendSize = () => {
      if (socket?.readyState === WebSocket.OPEN)
        socket.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
    };
    const onData = term.onData(sendText);
    const onResize = term.onResize(sendSize);
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(element);

    void (async () => {
      try {
        const [{ ticket }, token] = await Promise.all([api.terminalTicket(), auth.accessToken()]);
        if (disposed) return;
        socket = new WebSocket(terminalUrl, ["blastplane-terminal.v1", `bearer.${token}`, `ticket.${ticket}`]);
        socket.binaryType = "arraybuffer";
        socket.onopen = () => {
          sendSize();
          term.focus();
        };
        socket.onmessage = (event: MessageEvent) => {
          if (typeof event.data === "string") {
            const message = JSON.parse(event.data) as { type?: string; expires_at?: string };
            if (message.type === "session" && message.expires_at)
              setState({ kind: "open", expiresAt: new Date(message.expires_at).getTime() });
            return;
          }
          term.write(new Uint8Array(event.data as ArrayBuffer));
        };
        socket.onclose = (event: CloseEvent) => {
          if (disposed) return;
          setState({
            kind: "closed",
            reason: event.reason || (event.code === 1006 ? "the connection was refused or lost" : `code ${event.code}`),
          });
        };
      } catch (error) {
        if (!disposed) setState({ kind: "closed", reason: error instanceof Error ? error.message : String(error) });
      }
    })();

    return () => {
      disposed = true;
      observer.disconnect();
      onData.dispose();
      onResize.dispose();
      socket?.close(1000, "page closed");
      term.dispose();
    };
  }, [round]);

  const left = state.kind === "open" ? Math.max(0, Math.round((state.expiresAt - now) / 1000)) : 0;
  return (
    <div class="terminal">
      <p class="terminal-status" role="status">
        {state.kind === "connecting" ? "Connecting…" : null}
        {state.kind === "open"
          ? `Connected. Time left: ${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`
          : null}
        {state.kind === "closed" ? `Session ended: ${state.reason}. ` : null}
        {state.kind === "closed" ? (
          <button
            type="button"
            onClick={() => {
              setState({ kind: "connecting" });
              setRound((r) => r + 1);
            }}
          >
            Reconnect
          </button>
        ) : null}
      </p>
      <div class="terminal-screen" ref={host} data-testid="terminal-screen" />
    </div>
  );
}
