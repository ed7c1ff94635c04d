import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A scriptable OpenAI-compatible chat-completions server over HTTP (the vendor's wire format), so
 * the official `openai` client is what the narrator tests exercise. It answers
 * `POST …/chat/completions` (`/v1/chat/completions`, and Azure's
 * `/openai/deployments/<name>/chat/completions?api-version=…`), streaming or not, with what each
 * test scripts: function calls, text, usage, an HTTP status (429, 500), malformed bodies, a delay
 * or a hang; it records every request and notices when a client aborts one.
 */

/** One scripted answer. */
export interface FakeReply {
  /** An HTTP status other than 200 answers with an OpenAI error body. */
  status?: number;
  content?: string | null;
  tool_calls?: { name: string; arguments: string | Record<string, unknown>; id?: string }[];
  /** Measured usage; `null` leaves it out of the response. Default: 11 prompt, 7 completion tokens. */
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  model?: string;
  /** Sent verbatim as the 200 body (malformed output). */
  raw?: string;
  /** Never answers; the request stays open until the client gives up or aborts. */
  hang?: boolean;
  /** Answers after this many milliseconds (a slow provider). */
  delayMs?: number;
  /**
   * Streaming only: after the chunk that completes this many characters of content, the answer
   * waits for `release` (none: it never continues) — a provider caught mid-answer, without timing.
   */
  holdAfterChars?: number;
  release?: Promise<void>;
}

/** What the server received. */
export interface FakeRequest {
  method: string;
  /** Path and query. */
  url: string;
  headers: IncomingMessage["headers"];
  // biome-ignore lint/suspicious/noExplicitAny: the request body is the vendor's JSON, read freely by tests
  body: any;
  /** True once the client closed the connection before the answer was complete. */
  aborted: boolean;
}

export type FakeResponder = FakeReply | ((request: FakeRequest) => FakeReply);

export interface FakeOpenAi {
  /** The OpenAI-compatible base (`http://127.0.0.1:<port>/v1`). */
  readonly url: string;
  /** The origin (Azure's endpoint form). */
  readonly origin: string;
  readonly requests: FakeRequest[];
  /** Queues answers, one per request, in order; with none queued, `fallback` answers. */
  script(...replies: FakeResponder[]): void;
  /** Answers requests when nothing is queued (default: a 500). */
  fallback: FakeResponder;
  /** Resolves with the next request that arrives. */
  nextRequest(): Promise<FakeRequest>;
  /** Resolves with the next request the client aborts. */
  nextAbort(): Promise<FakeRequest>;
  /** Drops every queued answer (between tests). */
  reset(): void;
  close(): Promise<void>;
}

const DEFAULT_USAGE = { prompt_tokens: 11, completion_tokens: 7 };

function completionOf(reply: FakeReply, request: FakeRequest) {
  const toolCalls = reply.tool_calls?.map((c, i) => ({
    id: c.id ?? `call_${i}_${randomUUID().slice(0, 8)}`,
    type: "function",
    function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments) },
  }));
  const usage = reply.usage === null ? undefined : (reply.usage ?? DEFAULT_USAGE);
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: reply.model ?? String(request.body?.model ?? "fake-model"),
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: reply.content ?? null,
          ...(toolCalls && toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: toolCalls && toolCalls.length > 0 ? "tool_calls" : "stop",
      },
    ],
    ...(usage ? { usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } } : {}),
  };
}

/**
 * The same answer as server-sent `chat.completion.chunk` events (content in small pieces), each
 * with the count of content characters sent up to and including it.
 */
function chunksOf(
  completion: ReturnType<typeof completionOf>,
  includeUsage: boolean,
): { data: string; chars: number }[] {
  const base = {
    id: completion.id,
    object: "chat.completion.chunk",
    created: completion.created,
    model: completion.model,
  };
  const message = completion.choices[0]?.message;
  const chunk = (delta: unknown, finish: string | null = null) =>
    JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
  const out = [{ data: chunk({ role: "assistant", content: "" }), chars: 0 }];
  const content = message?.content ?? "";
  for (let i = 0; i < content.length; i += 8)
    out.push({ data: chunk({ content: content.slice(i, i + 8) }), chars: Math.min(content.length, i + 8) });
  const all = content.length;
  message?.tool_calls?.forEach((c, index) => {
    out.push({
      data: chunk({
        tool_calls: [{ index, id: c.id, type: "function", function: { name: c.function.name, arguments: "" } }],
      }),
      chars: all,
    });
    out.push({ data: chunk({ tool_calls: [{ index, function: { arguments: c.function.arguments } }] }), chars: all });
  });
  out.push({ data: chunk({}, completion.choices[0]?.finish_reason ?? "stop"), chars: all });
  if (includeUsage && completion.usage)
    out.push({ data: JSON.stringify({ ...base, choices: [], usage: completion.usage }), chars: all });
  out.push({ data: "[DONE]", chars: all });
  return out;
}

/** Starts the fake on an ephemeral loopback port. */
export async function startFakeOpenAi(): Promise<FakeOpenAi> {
  const queue: FakeResponder[] = [];
  const requests: FakeRequest[] = [];
  const abortWaiters: ((r: FakeRequest) => void)[] = [];
  const requestWaiters: ((r: FakeRequest) => void)[] = [];
  const pending = new Set<ServerResponse>();

  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      body = undefined;
    }
    const request: FakeRequest = {
      method: req.method ?? "",
      url: req.url ?? "",
      headers: req.headers,
      body,
      aborted: false,
    };
    requests.push(request);
    for (const w of requestWaiters.splice(0)) w(request);
    res.on("close", () => {
      pending.delete(res);
      if (!res.writableFinished) {
        request.aborted = true;
        for (const w of abortWaiters.splice(0)) w(request);
      }
    });
    if (req.method !== "POST" || !/\/chat\/completions(\?|$)/.test(request.url)) {
      res
        .writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: "not found" } }));
      return;
    }
    const responder = queue.shift() ?? fake.fallback;
    const reply = typeof responder === "function" ? responder(request) : responder;
    pending.add(res);
    if (reply.hang) return;
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (res.destroyed) return;
    if (reply.status && reply.status !== 200) {
      res
        .writeHead(reply.status, {
          "content-type": "application/json",
          ...(reply.status === 429 ? { "retry-after": "0" } : {}),
        })
        .end(JSON.stringify({ error: { message: `scripted ${reply.status}`, type: "server_error", code: null } }));
      return;
    }
    if (reply.raw !== undefined) {
      res.writeHead(200, { "content-type": "application/json" }).end(reply.raw);
      return;
    }
    const completion = completionOf(reply, request);
    const b = body as { stream?: boolean; stream_options?: { include_usage?: boolean } } | undefined;
    if (b?.stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let held = false;
      for (const { data, chars } of chunksOf(completion, b.stream_options?.include_usage === true)) {
        res.write(`data: ${data}\n\n`);
        if (!held && reply.holdAfterChars !== undefined && chars >= reply.holdAfterChars) {
          held = true;
          await (reply.release ?? new Promise<void>(() => undefined));
          if (res.destroyed) return;
        }
      }
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(completion));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const origin = `http://127.0.0.1:${port}`;

  const fake: FakeOpenAi = {
    url: `${origin}/v1`,
    origin,
    requests,
    script: (...replies) => {
      queue.push(...replies);
    },
    fallback: { status: 500 },
    nextRequest: () => new Promise((resolve) => requestWaiters.push(resolve)),
    nextAbort: () => new Promise((resolve) => abortWaiters.push(resolve)),
    reset: () => {
      queue.length = 0;
      fake.fallback = { status: 500 };
    },
    async close() {
      for (const res of pending) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
