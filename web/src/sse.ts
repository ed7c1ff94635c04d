/**
 * A server-sent-event reader over `fetch` (the browser's EventSource can neither POST nor send an
 * `Authorization` header): parses `event:`, `data:` and `id:` fields, skips comment lines
 * (heartbeats), and hands each complete frame over as it arrives.
 */
export interface SseMessage {
  event: string;
  data: string;
  /** The frame's `id:`, when it had one. */
  id?: string;
}

/** Reads `body` until it ends or `signal` aborts; resolves when the stream is over. */
export async function readSse(
  body: ReadableStream<Uint8Array>,
  onMessage: (message: SseMessage) => void,
  signal?: AbortSignal,
): Promise<void> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const cancel = () => void reader.cancel().catch(() => undefined);
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const message = parseBlock(block);
        if (message) onMessage(message);
        end = buffer.indexOf("\n\n");
      }
    }
  } finally {
    signal?.removeEventListener("abort", cancel);
  }
}

function parseBlock(block: string): SseMessage | undefined {
  let event = "message";
  const data: string[] = [];
  let id: string | undefined;
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  return data.length ? { event, data: data.join("\n"), ...(id === undefined ? {} : { id }) } : undefined;
}
