/**
 * The `Action.Execute` verb of an A1 card's decision (Teams Universal Actions): the outbound card
 * (`shared/notify/channels/platform-a.ts`) sends it, `teams-sso.ts` answers its invoke.
 */
export const APPROVAL_DECIDE_VERB = "approval.decide";
