import { z } from "zod";

/**
 * The app's runtime configuration, `/web-config.json`, served beside the app: where to sign in.
 * Runtime rather than build time so one build serves the local stack and every Azure deployment.
 */
export const webConfigSchema = z.object({
  auth: z.object({
    /** The app registration MSAL signs in as (a single-page-application redirect platform). */
    client_id: z.string().min(1),
    /** Entra ID: `https://login.microsoftonline.com/<tenant>`. MSAL requires https here. */
    authority: z.string().startsWith("https://"),
    /** `api://<api client id>/user_impersonation` (spec §5). */
    scopes: z.array(z.string().min(1)).min(1),
    protocol_mode: z.enum(["AAD", "OIDC"]).default("AAD"),
    /** Hosts MSAL may trust besides Microsoft's (a non-Microsoft OIDC authority). */
    known_authorities: z.array(z.string()).default([]),
    /** The provider's discovery document, given inline so MSAL fetches none (local provider). */
    authority_metadata: z.record(z.string(), z.unknown()).nullable().default(null),
  }),
  /** Origin of the dashboard API; empty for the app's own origin (no CORS needed). */
  api_base_url: z.string().default(""),
  /** The job API's terminal WebSocket (`wss://…/v1/terminal`); empty when this deployment has none. */
  terminal_url: z.string().default(""),
});

/** A validated runtime configuration. */
export type WebConfig = z.infer<typeof webConfigSchema>;

/** Fetches and validates `/web-config.json`; throws with a readable message when it is unusable. */
export async function loadWebConfig(): Promise<WebConfig> {
  const res = await fetch("/web-config.json", { cache: "no-store" });
  if (!res.ok) throw new Error(`the app's configuration (/web-config.json) could not be loaded: HTTP ${res.status}`);
  const parsed = webConfigSchema.safeParse(await res.json());
  if (!parsed.success) {
    throw new Error(
      `the app's configuration (/web-config.json) is invalid: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  return parsed.data;
}
