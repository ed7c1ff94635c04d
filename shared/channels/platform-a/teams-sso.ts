import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { JwtValidator } from "../../auth/jwt-validator.js";
import { sameObjectId } from "../../auth/object-id.js";
import type { Caller } from "../../auth/roles.js";
import { DependencyUnavailableError } from "../../errors.js";
import type { HttpResult } from "../../http/envelope.js";
import { approvalIdSchema } from "../../console/approvals/approval-store.js";
import type { createApprovalService } from "../../console/approvals/approval-service.js";
import { decisionView } from "../../console/tools/approval-tools.js";
import { effectiveRole, ToolError } from "../../console/tools/tool.js";
import type { AuditLog } from "../../ops/audit.js";
import { APPROVAL_DECIDE_VERB } from "../../notify/channels/platform-a.js";
import type { VerifiedTeamsActivity } from "./teams-verifier.js";

/**
 * A1 decisions from a Teams card through single sign-on (spec operator-console.md §5 items 4–5,
 * C-351, C-352, C-355, C-372–C-375). The A1 card's buttons are `Action.Execute` with the verb
 * {@link APPROVAL_DECIDE_VERB} and only the opaque `approval_id` (and, from the card's input, the
 * decision and a justification). Teams posts an `adaptiveCard/action` invoke; the first one carries
 * no token, so the bot answers Teams' Universal Actions SSO challenge (a `loginRequest` with the
 * token exchange resource: the API's Application ID URI). Teams then repeats the invoke with the
 * user's SSO token for that resource in `value.authentication.token` — the API token, which passes
 * the same validator as a dashboard bearer (RS256, issuer and audience from the app's auth
 * settings, the `user_impersonation` scope or an app role). Then, in order: the token's tenant is the
 * home tenant (a guest never decides), its user is the Teams sender, the sender's principal binding
 * names the decider, and the approvals domain decides exactly as `POST /api/approvals/{id}/decision`
 * does — `auth_time` fresh within `SVC_APPROVAL_REAUTH_MAX_AGE_SECONDS`, self-approval and a role
 * below the action's floor refused, a second identical decision answered with the existing evidence.
 * Nothing here decides: every refusal is audited (`channel.a1_sso_refused`), every decision and
 * domain refusal by the approvals domain (`console.approve_hil`).
 */

export { APPROVAL_DECIDE_VERB };
/** The invoke Teams posts for an `Action.Execute` (Universal Actions). */
export const ADAPTIVE_CARD_ACTION_INVOKE = "adaptiveCard/action";

/** The data of an `approval.decide` action: the card's opaque id plus the user's inputs. */
const decideData = z.looseObject({
  approval_id: approvalIdSchema,
  decision: z.enum(["approve", "reject"]),
  justification: z.string().trim().min(3, "give a short justification").max(500),
  // The item's action_hash the card carries: the round trip re-validates it (spec §5 item 5).
  action_hash: z.string().regex(/^[0-9a-f]{64}$/),
});

/** An `adaptiveCard/action` invoke's value (Teams Universal Actions, with the SSO `authentication`). */
const invokeValue = z.looseObject({
  action: z.looseObject({
    type: z.literal("Action.Execute"),
    verb: z.string().max(100),
    data: z.unknown().optional(),
  }),
  authentication: z
    .looseObject({
      id: z.string().max(256).optional(),
      connectionName: z.string().max(256).optional(),
      token: z.string().min(1).max(16_384),
    })
    .optional(),
});

/** An invoke answer (`AdaptiveCardInvokeResponse`): Bot Service relays the body to Teams. */
export interface AdaptiveCardInvokeResponse {
  statusCode: number;
  type: string;
  value: unknown;
}

export interface TeamsSsoSettings {
  /** The home tenant (`SVC_PLATFORM_A_TENANT_ID`): only its users decide A1. */
  tenantId: string;
  /** The bot's app id (the token exchange resource's id in the challenge). */
  botAppId: string;
  /** The API's Application ID URI, `api://<client id>`: the SSO token's resource. */
  apiResource: string;
  /** The Azure Bot resource's OAuth connection that Teams' SSO names (`SVC_PLATFORM_A_SSO_CONNECTION_NAME`). */
  connectionName: string;
}

export interface TeamsSsoDependencies {
  settings: TeamsSsoSettings;
  /** The dashboard's bearer validator (the same issuer, audience and keys). */
  validator: JwtValidator;
  approvals: Pick<ReturnType<typeof createApprovalService>, "decide">;
  audit: AuditLog;
  now?: () => Date;
}

const invoke = (response: AdaptiveCardInvokeResponse): HttpResult => ({ status: 200, jsonBody: response });

const errorOf = (statusCode: number, code: string, message: string): HttpResult =>
  invoke({ statusCode, type: "application/vnd.microsoft.error", value: { code, message } });

/** The status an approvals-domain refusal answers with (the decision route's mapping). */
function refusalStatus(error: ToolError): number {
  switch (error.type) {
    case "reauthentication_required":
      return 401;
    case "not_found":
      return 404;
    case "self_approval":
    case "forbidden":
      return 403;
    case "conflict":
    case "verifier_abstained":
    case "verifier_denied":
      return 409;
    default:
      return 400;
  }
}

/** The card that replaces the A1 card once decided: the outcome only, no further action. */
function outcomeCard(view: ReturnType<typeof decisionView>) {
  const decided = view.decision?.decision ?? null;
  return {
    type: "AdaptiveCard",
    version: "1.5",
    $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
    body: [
      { type: "TextBlock", weight: "Bolder", wrap: true, text: `Approval ${view.approval_id}` },
      {
        type: "FactSet",
        facts: [
          { title: "State", value: view.state },
          { title: "Decision", value: decided ?? "none" },
          { title: "Outcome", value: view.outcome },
        ],
      },
    ],
  };
}

/** Handles `adaptiveCard/action` invokes of the A1 card; anything else is not ours (undefined). */
export function createTeamsSsoDecider(deps: TeamsSsoDependencies) {
  const now = deps.now ?? (() => new Date());
  const { settings } = deps;

  /** Teams' SSO challenge: Teams fetches a token for the resource and repeats the invoke with it. */
  const loginRequest = (text: string): HttpResult =>
    invoke({
      statusCode: 401,
      type: "application/vnd.microsoft.activity.loginRequest",
      value: {
        text,
        connectionName: settings.connectionName,
        tokenExchangeResource: { id: settings.botAppId, uri: settings.apiResource },
        // Teams shows this only when silent SSO fails; the console is where a user then decides.
        buttons: [],
      },
    });

  return {
    /** Whether this verified activity is an A1 card's decision invoke. */
    handles(verified: VerifiedTeamsActivity): boolean {
      const a = verified.activity as { type: string; name?: unknown };
      return a.type === "invoke" && a.name === ADAPTIVE_CARD_ACTION_INVOKE;
    },

    async decide(verified: VerifiedTeamsActivity): Promise<HttpResult> {
      const requestId = randomUUID();
      const at = now();
      const activity = verified.activity as VerifiedTeamsActivity["activity"] & { value?: unknown };
      const actor = {
        oid: verified.principal ?? `platform_a:${activity.from.aadObjectId ?? "unresolved"}`,
        name: activity.from.name?.slice(0, 100) ?? "",
      };
      const refuse = async (
        reason: string,
        target: string,
        answer: HttpResult,
        extra: Record<string, unknown> = {},
      ): Promise<HttpResult> => {
        await deps.audit.record({
          actor,
          action: "channel.a1_sso_refused",
          target,
          outcome: "denied",
          request_id: requestId,
          details: { channel: "platform_a", reason, side_effect_class: "approve", ...extra },
          visibility_floor: "Approver",
        });
        return answer;
      };

      const value = invokeValue.safeParse(activity.value);
      if (!value.success || value.data.action.verb !== APPROVAL_DECIDE_VERB)
        return refuse("unknown_action", "platform_a", errorOf(400, "BadRequest", "Unknown card action."));
      const data = decideData.safeParse(value.data.action.data);
      if (!data.success)
        return refuse(
          "invalid_decision_data",
          "platform_a",
          errorOf(
            400,
            "BadRequest",
            "The decision needs an approval id, its action hash, a decision and a short justification.",
          ),
        );
      const { approval_id: approvalId } = data.data;
      // A guest of another tenant never decides A1 (spec §5 item 4), whatever token it brings.
      if (verified.trust !== "same_tenant")
        return refuse(
          "guest_tenant",
          approvalId,
          errorOf(403, "Forbidden", "Approvals cannot be decided by a guest of another tenant. Nothing was decided."),
        );
      const token = value.data.authentication?.token;
      if (!token)
        return refuse(
          "sso_token_required",
          approvalId,
          loginRequest("Sign in to decide this approval. Nothing was decided."),
        );
      let caller: Caller;
      try {
        caller = await deps.validator.validate(`Bearer ${token}`);
      } catch (error) {
        // The identity provider's discovery or keys are unreachable: the token may be fine, so no
        // re-prompt (Teams would only loop on it); a retryable answer instead.
        if (error instanceof DependencyUnavailableError)
          return refuse(
            "identity_provider_unavailable",
            approvalId,
            errorOf(
              503,
              "ServiceUnavailable",
              "The sign-in service is unreachable right now; try again in a minute. Nothing was decided.",
            ),
          );
        return refuse(
          "sso_token_invalid",
          approvalId,
          loginRequest("Sign in again to decide this approval. Nothing was decided."),
          { error: error instanceof Error ? error.message.slice(0, 200) : "invalid" },
        );
      }
      if (!sameObjectId(caller.tenant_id, settings.tenantId))
        return refuse(
          "guest_tenant",
          approvalId,
          errorOf(403, "Forbidden", "Approvals cannot be decided by a guest of another tenant. Nothing was decided."),
          { token_tenant: caller.tenant_id.slice(0, 64) },
        );
      // The token's user must be the one who pressed the button, and bound to a principal.
      if (!activity.from.aadObjectId || !sameObjectId(caller.oid, activity.from.aadObjectId) || !verified.principal)
        return refuse(
          "sso_user_mismatch",
          approvalId,
          errorOf(403, "Forbidden", "The signed-in user is not the sender. Nothing was decided."),
        );
      // The signed-in identity must be the bound principal itself: were a binding to map the Teams user
      // to another principal, a requester could approve its own request under the other id and the
      // approvals domain's self-approval check would not see it (spec §5 item 8).
      if (!sameObjectId(caller.oid, verified.principal))
        return refuse(
          "identity_mismatch",
          approvalId,
          errorOf(
            403,
            "Forbidden",
            "The signed-in user is bound to a different principal; decide in the web console. Nothing was decided.",
          ),
        );
      try {
        const result = await deps.approvals.decide({
          approvalId,
          actor: { oid: verified.principal, name: caller.name.slice(0, 200) },
          role: effectiveRole(caller),
          decision: data.data.decision,
          justification: data.data.justification,
          actionHash: data.data.action_hash,
          requestId,
          now: at,
          // A token without the claim is never fresh (the decision route's rule).
          authTime: caller.auth_time ?? null,
        });
        return invoke({
          statusCode: 200,
          type: "application/vnd.microsoft.card.adaptive",
          value: outcomeCard(decisionView(result)),
        });
      } catch (error) {
        if (!(error instanceof ToolError)) throw error;
        // The approvals domain audited its refusal; the answer carries its sentence.
        // A stale sign-in: Teams' silent SSO would only bring back a token with the same old
        // auth_time (a loop), so the answer says a fresh sign-in is needed and where to decide.
        if (error.type === "reauthentication_required")
          return errorOf(
            401,
            "reauthentication_required",
            'A fresh sign-in is needed to decide this approval: sign in again and decide it in the web console ("Open the approval in the console" on the card). Nothing was decided.',
          );
        return errorOf(refusalStatus(error), error.type, error.message.slice(0, 500));
      }
    },
  };
}

export type TeamsSsoDecider = ReturnType<typeof createTeamsSsoDecider>;
