import type { AccessToken } from "@azure/identity";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiTokenService } from "../../shared/secrets/api-tokens.js";
import { createKeyVaultSecretStore } from "../../shared/secrets/key-vault-secret-store.js";
import { type FakeKeyVault, startFakeKeyVault } from "../fakes/key-vault-server.js";

let vault: FakeKeyVault;

/** Stands in for the managed identity (Entra ID cannot be reached here). */
function credential(token: string) {
  return { getToken: async (): Promise<AccessToken> => ({ token, expiresOnTimestamp: Date.now() + 3_600_000 }) };
}

function store(token = vault.token) {
  return createKeyVaultSecretStore({
    vaultUrl: vault.url,
    credential: credential(token),
    // The fake's name is an IP, not *.vault.azure.net; in Azure the check stays on.
    clientOptions: {
      tlsOptions: { ca: vault.ca },
      disableChallengeResourceVerification: true,
      retryOptions: { maxRetries: 0 },
    },
  });
}

beforeAll(async () => {
  vault = await startFakeKeyVault();
});

afterAll(async () => {
  await vault?.close();
});

describe("Key Vault secret store (the Azure side of the shared job-API token)", () => {
  it("answers undefined for a missing secret, then round-trips a value through the real SDK", async () => {
    const s = store();
    expect(await s.get("jobapi-api-token")).toBeUndefined();
    await s.set("jobapi-api-token", '{"current":{"value":"bpt_x","created_at":"2026-01-01T00:00:00.000Z"}}');
    expect(await s.get("jobapi-api-token")).toContain("bpt_x");
    // The SDK answered the bearer challenge and then sent the identity's token.
    expect(vault.requests.some((r) => !r.authorized)).toBe(true);
    expect(vault.requests.filter((r) => r.authorized).length).toBeGreaterThanOrEqual(3);
  });

  it("B-201 B-202 lets the dashboard rotate the token and the job API see it, with the grace period", async () => {
    const dashboardSide = new ApiTokenService(store(), { cacheMs: 0 });
    const jobApiSide = new ApiTokenService(store(), { cacheMs: 0 });
    await dashboardSide.ensure();
    const first = (await dashboardSide.state())?.current.value ?? "";
    expect(await jobApiSide.isValid(first)).toBe(true);
    const rotated = await dashboardSide.rotate(3600);
    expect(await jobApiSide.isValid(rotated.current.value)).toBe(true);
    expect(await jobApiSide.isValid(first)).toBe(true);
    expect(await jobApiSide.isValid("bpt_wrong")).toBe(false);
    const noGrace = await dashboardSide.rotate(0);
    expect(await jobApiSide.isValid(rotated.current.value)).toBe(false);
    expect(await jobApiSide.isValid(noGrace.current.value)).toBe(true);
  });

  it("fails clearly when the identity's token is refused", async () => {
    await expect(store("not-the-right-token").get("jobapi-api-token")).rejects.toMatchObject({ statusCode: 401 });
  });
});
