import { createHash } from "node:crypto";
import { z } from "zod";
import { InvalidRequestError, UnauthorizedError, ValidationError } from "../../errors.js";
import { zodIssues } from "../../http/validation.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { ChannelQueue, TurnStarter } from "../inbound/channel-queue.js";
import { SIGNATURE_WINDOW_SECONDS, verifySlackSignature } from "./signature.js";
import { parseSlackCommand, parseSlackEvent, parseSlackInteraction, type SlackInbound } from "./slack-wire.js";

/**
 * Chat platform B's inbound endpoint, transport-agnostic (the Functions triggers in
 * `functions/channels.ts` only read the body and map the answer): signature first, on the raw
 * bytes and before any parsing; then a replay check of the signature itself; then the wire
 * format; then the channel queue. The request is answered once the turn is durably queued and
 * started (Slack wants its answer within 3 s); the turn runs after the answer and its reply goes
 * out with chat.postMessage (the queue's worker timer picks up whatever a crash leaves behind).
 */

/** Slack's payloads are small; a larger body is refused before it is verified or parsed (413). */
export const SLACK_BODY_LIMIT_BYTES = 64 * 1024;
/** JSON nested deeper than this is refused before parsing. */
const MAX_JSON_DEPTH = 32;

export const CHANNEL_REPLAY_TABLE = "channelreplay";

export type SlackEndpoint = "events" | "commands" | "interactions";

export interface SlackInboundDependencies {
  signingSecret(): Promise<string>;
  queue: ChannelQueue;
  /** Starts an admitted turn after the answer, unless the route passes its own. */
  start: TurnStarter;
  /** Where used signatures are remembered for the signature window (replay guard). */
  tables: TableSource;
  now?: () => Date;
}

/** What the trigger answers. */
export interface SlackAnswer {
  status: number;
  body?: unknown;
}

/** The deepest bracket nesting of a JSON text (strings skipped), counted without parsing. */
export function jsonDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{" || c === "[") max = Math.max(max, ++depth);
    else if (c === "}" || c === "]") depth--;
  }
  return max;
}

export function createSlackInbound(deps: SlackInboundDependencies) {
  const now = deps.now ?? (() => new Date());
  const replay = tableOpener(deps.tables, CHANNEL_REPLAY_TABLE);

  /** Remembers a signature; false when it was seen before (a replayed request). */
  async function firstUse(signature: string, at: Date): Promise<boolean> {
    try {
      await (await replay()).createEntity({
        partitionKey: "sig",
        rowKey: createHash("sha256").update(signature).digest("hex"),
        at: at.toISOString(),
        // Rows older than the window can go; a replay that old already fails the timestamp check.
        expires_at: new Date(at.getTime() + 2 * SIGNATURE_WINDOW_SECONDS * 1000).toISOString(),
      });
      return true;
    } catch (error) {
      if (isStatus(error, 409)) return false;
      throw error;
    }
  }

  function parse(endpoint: SlackEndpoint, body: string, contentType: string, at: Date): SlackInbound {
    try {
      if (endpoint === "events") {
        if (!/^application\/json\b/i.test(contentType))
          throw new InvalidRequestError("content type must be application/json");
        if (jsonDepth(body) > MAX_JSON_DEPTH) throw new InvalidRequestError("request body is nested too deeply");
        let raw: unknown;
        try {
          raw = JSON.parse(body);
        } catch {
          throw new InvalidRequestError("request body is not valid JSON");
        }
        return parseSlackEvent(raw, at);
      }
      if (!/^application\/x-www-form-urlencoded\b/i.test(contentType))
        throw new InvalidRequestError("content type must be application/x-www-form-urlencoded");
      const form = new URLSearchParams(body);
      if (endpoint === "commands") return parseSlackCommand(form, at);
      const payload = form.get("payload") ?? "";
      if (jsonDepth(payload) > MAX_JSON_DEPTH) throw new InvalidRequestError("payload is nested too deeply");
      try {
        JSON.parse(payload);
      } catch {
        throw new InvalidRequestError("payload is not valid JSON");
      }
      return parseSlackInteraction(form, at);
    } catch (error) {
      if (error instanceof z.ZodError) throw new ValidationError(zodIssues(error, "body", undefined));
      throw error;
    }
  }

  return {
    /**
     * Handles one request whose body (at most {@link SLACK_BODY_LIMIT_BYTES}) was read as text.
     * Throws the domain errors the transport maps: 401 (signature, timestamp, replay), 400/422
     * (malformed), 429 (queue full: Slack retries).
     */
    async handle(
      endpoint: SlackEndpoint,
      request: { headers: Headers; body: string },
      /** How this request's admitted turn starts (the route: its own orchestration). */
      start: TurnStarter = deps.start,
    ): Promise<SlackAnswer> {
      const at = now();
      const signature = request.headers.get("x-slack-signature");
      const verdict = verifySlackSignature({
        secret: await deps.signingSecret(),
        timestamp: request.headers.get("x-slack-request-timestamp"),
        signature,
        body: request.body,
        now: at,
      });
      // One answer for every failure: the caller learns nothing about which check failed.
      if (!verdict.ok || !signature) throw new UnauthorizedError("invalid request signature");
      if (!(await firstUse(signature, at))) throw new UnauthorizedError("invalid request signature");
      const inbound = parse(endpoint, request.body, request.headers.get("content-type") ?? "", at);
      if (inbound.kind === "url_verification") return { status: 200, body: { challenge: inbound.challenge } };
      if (inbound.kind === "ignored") return { status: 200 };
      const admitted = await deps.queue.enqueue(inbound.turn, at);
      // Answered now; the turn runs after the answer and replies through the Web API.
      if (admitted === "accepted") await start(inbound.turn);
      return { status: 200 };
    },
  };
}
