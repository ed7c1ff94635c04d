import { z } from "zod";
import type { HttpResult } from "../../http/envelope.js";
import { type HttpRequestLike, parseJsonBody } from "../../http/validation.js";
import { ACTIVITY_BODY_LIMIT_BYTES, type createTeamsVerifier, type VerifiedTeamsActivity } from "./teams-verifier.js";

/**
 * `POST /api/messages` (chat platform A, the Bot Framework convention) as a handler over the
 * transport-neutral request: the Bot Service token first — before a byte of the body is read —
 * then the bounded JSON body, then the activity, tenant and sender checks (spec operator-console.md
 * §5 item 7). Only a verified activity reaches `accept` (the Agents SDK adapter and, through it,
 * the channel queue); every refusal is a thrown domain error the transport maps to 401, 403, 400,
 * 413 or 422 in the spec's envelope.
 */
export function createTeamsMessagesHandler(deps: {
  verifier: ReturnType<typeof createTeamsVerifier>;
  accept: (verified: VerifiedTeamsActivity, body: unknown) => Promise<HttpResult | undefined>;
}) {
  return async (request: HttpRequestLike): Promise<HttpResult> => {
    const identity = await deps.verifier.verifyToken(request.headers.get("authorization"));
    const body = await parseJsonBody(request, z.unknown(), ACTIVITY_BODY_LIMIT_BYTES);
    const verified = deps.verifier.verifyActivity(identity, body);
    return (await deps.accept(verified, body)) ?? { status: 202 };
  };
}
