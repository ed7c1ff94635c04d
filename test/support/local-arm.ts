import type { AccessToken, TokenCredential } from "@azure/identity";
import { ARM_SCOPE } from "../../shared/cluster/arm-connection.js";
import { jwksTokenVerifier } from "../../local/arm/auth.js";
import { LOCAL_ARM_PROVIDERS } from "../../local/arm/providers/index.js";
import { seedResourceGroup, seedSubscription } from "../../local/arm/providers/resources.js";
import { type LocalArm, type LocalArmOptions, startLocalArm } from "../../local/arm/server.js";
import { type DevIdentityProvider, devManagedIdentityIssuer, startDevIdentityProvider } from "../../local/dev-idp.js";
import { testCertificate } from "./test-certificate.js";

/** The subscription, tenant and resource group every local-ARM test starts with. */
export const ARM_WORLD = {
  tenantId: "72f988bf-86f1-41af-91ab-2d7cd011db47",
  subscriptionId: "11111111-2222-4333-8444-555555555555",
  subscriptionName: "Research (local)",
  resourceGroup: "rg-blast",
  location: "eastus",
} as const;

export interface LocalArmWorld {
  arm: LocalArm;
  idp: DevIdentityProvider;
  /** The managed identity's credential (App Service managed-identity protocol against the dev IdP). */
  credential: TokenCredential;
  /** Client options for any `@azure/arm-*` client: endpoint override, the test CA, no SDK retries. */
  clientOptions: {
    endpoint: string;
    tlsOptions: { ca: string };
    retryOptions: { maxRetries: number };
    credentials: { scopes: string[] };
    credentialScopes: string[];
  };
  ca: string;
  close(): Promise<void>;
}

/**
 * Starts the local Resource Manager (every provider module) on loopback TLS with the test
 * certificate, and the development identity provider whose managed-identity endpoint issues the
 * tokens it verifies; seeds one subscription and resource group. One per test file.
 */
export async function startLocalArmWorld(
  options: Partial<Pick<LocalArmOptions, "pollsBeforeDone" | "retryAfterSeconds" | "pageSize" | "providers">> = {},
): Promise<LocalArmWorld> {
  const { key, cert } = testCertificate();
  const idp = await startDevIdentityProvider({ port: 0, clientId: "blastplane-test", tenantId: ARM_WORLD.tenantId });
  const arm = await startLocalArm({
    key,
    cert,
    providers: options.providers ?? LOCAL_ARM_PROVIDERS,
    verifyToken: jwksTokenVerifier({ jwksUrl: idp.jwksUrl, issuer: devManagedIdentityIssuer(ARM_WORLD.tenantId) }),
    pollsBeforeDone: options.pollsBeforeDone ?? 1,
    retryAfterSeconds: options.retryAfterSeconds ?? 0,
    ...(options.pageSize ? { pageSize: options.pageSize } : {}),
  });
  seedSubscription(arm.store, {
    subscriptionId: ARM_WORLD.subscriptionId,
    displayName: ARM_WORLD.subscriptionName,
    tenantId: ARM_WORLD.tenantId,
  });
  seedResourceGroup(arm.store, ARM_WORLD.subscriptionId, ARM_WORLD.resourceGroup, ARM_WORLD.location);
  return {
    arm,
    idp,
    ca: cert,
    credential: managedIdentityCredential(idp.managedIdentity.endpoint, idp.managedIdentity.identityHeader),
    clientOptions: {
      endpoint: arm.url,
      tlsOptions: { ca: cert },
      retryOptions: { maxRetries: 0 },
      credentials: { scopes: [ARM_SCOPE] },
      credentialScopes: [ARM_SCOPE],
    },
    async close() {
      await arm.close();
      await idp.close();
    },
  };
}

/**
 * A credential speaking the App Service managed-identity protocol (2019-08-01), what
 * `ManagedIdentityCredential` does with `IDENTITY_ENDPOINT`/`IDENTITY_HEADER`, without setting
 * those in the test process's environment.
 */
export function managedIdentityCredential(endpoint: string, identityHeader: string): TokenCredential {
  return {
    async getToken(scopes: string | string[]): Promise<AccessToken> {
      const scope = Array.isArray(scopes) ? (scopes[0] ?? "") : scopes;
      const url = new URL(endpoint);
      url.searchParams.set("api-version", "2019-08-01");
      url.searchParams.set("resource", scope.replace(/\/\.default$/, ""));
      const res = await fetch(url, { headers: { "X-IDENTITY-HEADER": identityHeader } });
      if (!res.ok) throw new Error(`managed identity endpoint answered ${res.status}`);
      const body = (await res.json()) as { access_token: string; expires_on: string };
      return { token: body.access_token, expiresOnTimestamp: Number(body.expires_on) * 1000 };
    },
  };
}
