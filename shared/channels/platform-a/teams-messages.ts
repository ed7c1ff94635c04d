import { z } from "zod";
import type { HttpResult } from "../../http/envelope.js";
import { UnauthorizedError } from "../../errors.js";
import { clientAddress } from "../../http/client-address.js";
import { isLoopbackAddress, isLoopbackHostHeader } from "../../http/loopback-host.js";
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
  /**
   * `SVC_PLATFORM_A_LOCAL_ANONYMOUS` (local profile only): a request without `Authorization` from
   * this machine is checked as an activity for a loopback Bot Connector (the Agents Playground).
   */
  localAnonymous?: boolean;
}) {
  return async (request: HttpRequestLike): Promise<HttpResult> => {
    if (deps.localAnonymous && !request.headers.get("authorization")) {
      // Only this machine: the last proxy hop's peer and the Host both loopback (no other host, no
      // DNS-rebinding page); everyone else still needs a Bot Service token.
      if (
        !isLoopbackAddress(clientAddress(request.headers)) ||
        !isLoopbackHostHeader(request.headers.get("host") ?? "")
      )
        throw new UnauthorizedError(
          "a Bot Service bearer token is required (token-less activities are accepted from this machine only)",
        );
      const body = await parseJsonBody(request, z.unknown(), ACTIVITY_BODY_LIMIT_BYTES);
      const verified = deps.verifier.verifyLocalAnonymousActivity(body);
      return (await deps.accept(verified, body)) ?? { status: 202 };
    }
    const identity = await deps.verifier.verifyToken(request.headers.get("authorization"));
    const body = await parseJsonBody(request, z.unknown(), ACTIVITY_BODY_LIMIT_BYTES);
    const verified = deps.verifier.verifyActivity(identity, body);
    return (await deps.accept(verified, body)) ?? { status: 202 };
  };
}
