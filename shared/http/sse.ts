/**
 * Server-sent events (the WHATWG `text/event-stream` format) as a transport-neutral response body:
 * named frames with JSON data, comment heartbeats while idle, and a bound on what a client may
 * leave unread (a slow reader is dropped — the stream ends — rather than held in memory).
 */

/** One SSE frame: its event name, JSON data and, for resumable streams, its id. */
export interface SseFrame {
  event: string;
  data: unknown;
  /** Sent as `id:`; the client echoes the last one as `Last-Event-ID` when it reconnects. */
  id?: string;
}

/** Why a stream ended. */
export type SseEnd = "completed" | "client_closed" | "slow_reader" | "failed";

/** The producer's side of one stream. */
export interface SseChannel {
  /** Sends a frame; false (and nothing sent) once the stream has ended. */
  send(frame: SseFrame): boolean;
  /** Ends the stream (the producer is done). */
  close(): void;
  /** Aborted when the stream ends for any reason: producers stop their work on it. */
  readonly abortSignal: AbortSignal;
  /** Resolves with why the stream ended. */
  readonly ended: Promise<SseEnd>;
}

export interface SseStreamOptions {
  /** A comment line (`: heartbeat`) goes out after this long without any other output. */
  heartbeatMs: number;
  /** The client connection's close signal. */
  clientAbortSignal?: AbortSignal;
  /** Bytes the client has not read yet (written to the connection, not yet taken by the peer). */
  backlogBytes?: () => number;
  /** Above this backlog (plus what waits in the body's own queue) the client is dropped. */
  maxBacklogBytes: number;
  /** The reconnection delay the client is told (`retry:`), for resumable streams. */
  retryMs?: number;
}

/** The response headers of an event stream (no caching, no proxy buffering). */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache, no-transform",
  "X-Accel-Buffering": "no",
};

const encoder = new TextEncoder();

/** Encodes a frame: the data is one line of JSON, so no payload can inject a field or end the frame. */
export function encodeFrame(frame: SseFrame): string {
  const id = frame.id === undefined ? "" : `id: ${frame.id.replace(/[\r\n\0]/g, "")}\n`;
  return `${id}event: ${frame.event.replace(/[\r\n]/g, "")}\ndata: ${JSON.stringify(frame.data)}\n\n`;
}

/**
 * Creates an event stream: the body for the response and the channel its producer writes to.
 * Nothing is buffered beyond `maxBacklogBytes`: the body's own queue counts towards the bound.
 */
export function createSseStream(options: SseStreamOptions): { body: ReadableStream<Uint8Array>; channel: SseChannel } {
  const stop = new AbortController();
  let resolveEnded!: (end: SseEnd) => void;
  const ended = new Promise<SseEnd>((resolve) => {
    resolveEnded = resolve;
  });
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let lastOutput = Date.now();
  let heartbeat: ReturnType<typeof setInterval> | undefined;
  let queuedBytes = 0;

  const finish = (end: SseEnd) => {
    if (stop.signal.aborted) return;
    stop.abort(new Error(`event stream ended: ${end}`));
    if (heartbeat) clearInterval(heartbeat);
    options.clientAbortSignal?.removeEventListener("abort", onClientAbort);
    try {
      controller.close();
    } catch {
      // Already closed or cancelled by the reader.
    }
    resolveEnded(end);
  };
  const onClientAbort = () => finish("client_closed");

  const write = (text: string): boolean => {
    if (stop.signal.aborted) return false;
    const bytes = encoder.encode(text);
    if (queuedBytes + (options.backlogBytes?.() ?? 0) + bytes.length > options.maxBacklogBytes) {
      finish("slow_reader");
      return false;
    }
    queuedBytes += bytes.length;
    controller.enqueue(bytes);
    lastOutput = Date.now();
    return true;
  };

  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
    },
    pull() {
      // The reader took everything queued so far.
      queuedBytes = 0;
    },
    cancel() {
      finish("client_closed");
    },
  });

  if (options.clientAbortSignal?.aborted) finish("client_closed");
  else {
    options.clientAbortSignal?.addEventListener("abort", onClientAbort, { once: true });
    // A comment first: the status and headers reach the client before the first answer frame does.
    write(`${options.retryMs === undefined ? "" : `retry: ${options.retryMs}\n`}: stream open\n\n`);
    const tick = Math.max(50, Math.floor(options.heartbeatMs / 2));
    heartbeat = setInterval(() => {
      if (Date.now() - lastOutput >= options.heartbeatMs) write(": heartbeat\n\n");
    }, tick);
  }

  return {
    body,
    channel: {
      send: (frame) => write(encodeFrame(frame)),
      close: () => finish("completed"),
      abortSignal: stop.signal,
      ended,
    },
  };
}
