import {
  type AccountInfo,
  BrowserAuthError,
  InteractionRequiredAuthError,
  type IPublicClientApplication,
  ProtocolMode,
  PublicClientApplication,
} from "@azure/msal-browser";
import type { WebConfig } from "./config.js";

/** The signed-in session: who, and a way to get a current access token for the dashboard API. */
export interface Auth {
  /** The signed-in account, or undefined before sign-in. */
  readonly account: AccountInfo | undefined;
  /** Starts the authorization code + PKCE flow (a full-page redirect to the identity provider). */
  signIn(): Promise<void>;
  /** Signs out at the identity provider and comes back signed out. */
  signOut(): Promise<void>;
  /**
   * A current access token for the API scope: from MSAL's cache or a silent renewal; when the
   * provider needs the user again, redirects to sign in (and never resolves).
   */
  accessToken(): Promise<string>;
  /**
   * Signs the user in again interactively (`prompt=login`: a full-page redirect to the identity
   * provider, which asks for the user whatever session it keeps) and comes back to this page;
   * `state` comes back with the fresh token through {@link takeReauthentication}. Never resolves.
   */
  reauthenticate(state: string): Promise<void>;
  /**
   * The fresh access token of a re-authentication this page load completed, and its `state`, once:
   * a second call returns undefined.
   */
  takeReauthentication(): { state: string; accessToken: string } | undefined;
}

/** The prefix of the `state` of a re-authentication (what {@link Auth.takeReauthentication} reports). */
const REAUTH_STATE_PREFIX = "reauth:";

/**
 * Creates MSAL (authorization code with PKCE; tokens in session storage, MSAL's default for
 * single-page apps) and completes a sign-in the provider has just redirected back from.
 */
export async function createAuth(config: WebConfig["auth"]): Promise<Auth> {
  const redirectUri = `${window.location.origin}/`;
  const msal: IPublicClientApplication = new PublicClientApplication({
    auth: {
      clientId: config.client_id,
      authority: config.authority,
      knownAuthorities: config.known_authorities,
      ...(config.authority_metadata ? { authorityMetadata: JSON.stringify(config.authority_metadata) } : {}),
      redirectUri,
      postLogoutRedirectUri: redirectUri,
    },
    cache: { cacheLocation: "sessionStorage" },
    system:
      config.protocol_mode === "OIDC"
        ? // The local provider keeps no session and issues no refresh token: a silent renewal
          // comes back at once with login_required, read from the frame (no redirect bridge page).
          { protocolMode: ProtocolMode.OIDC, enableLegacyPolling: true }
        : { protocolMode: ProtocolMode.AAD },
  });
  await msal.initialize();
  const result = await msal.handleRedirectPromise();
  if (result?.account) msal.setActiveAccount(result.account);
  let reauthenticated =
    result?.state?.startsWith(REAUTH_STATE_PREFIX) && result.accessToken
      ? { state: result.state.slice(REAUTH_STATE_PREFIX.length), accessToken: result.accessToken }
      : undefined;
  const account = (): AccountInfo | undefined => msal.getActiveAccount() ?? msal.getAllAccounts()[0] ?? undefined;
  const scopes = config.scopes;

  return {
    get account() {
      return account();
    },
    async signIn() {
      await msal.loginRedirect({ scopes, redirectStartPage: window.location.href });
    },
    async signOut() {
      const current = account();
      await msal.logoutRedirect(current ? { account: current } : {});
    },
    async reauthenticate(state) {
      const current = account();
      await msal.acquireTokenRedirect({
        scopes,
        prompt: "login",
        state: `${REAUTH_STATE_PREFIX}${state}`,
        redirectStartPage: window.location.href,
        ...(current ? { account: current, loginHint: current.username || undefined } : {}),
      });
      return new Promise<void>(() => undefined);
    },
    takeReauthentication() {
      const taken = reauthenticated;
      reauthenticated = undefined;
      return taken;
    },
    async accessToken() {
      const current = account();
      if (!current) {
        await msal.loginRedirect({ scopes, redirectStartPage: window.location.href });
        return new Promise<string>(() => undefined);
      }
      try {
        return (await msal.acquireTokenSilent({ scopes, account: current })).accessToken;
      } catch (error) {
        // The provider needs the user (or a silent renewal could not complete): sign in again.
        if (!(error instanceof InteractionRequiredAuthError || error instanceof BrowserAuthError)) throw error;
        await msal.acquireTokenRedirect({ scopes, account: current, redirectStartPage: window.location.href });
        return new Promise<string>(() => undefined);
      }
    },
  };
}
