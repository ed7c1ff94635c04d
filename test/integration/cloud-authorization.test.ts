import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import type { AccessToken } from "@azure/identity";
import { ContainerServiceClient } from "@azure/arm-containerservice";
import { BatchV1Api, KubeConfig } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import {
  CloudAuthorizationError,
  describeCloudAuthorizationError,
  explainCloudAuthorization,
} from "../../shared/auth/cloud-authorization.js";
import { mapErrorToResult } from "../../shared/http/envelope.js";
import { createKeyVaultSecretStore } from "../../shared/secrets/key-vault-secret-store.js";
import { type Refusal, startRefusalServer } from "../fakes/azure-refusal-server.js";
import { testJobRecord } from "../support/helpers.js";
import { refusedShardDispatcher, refusingBlobService } from "../support/refused-shard-dispatcher.js";
import { captureLogger, testAzurite } from "../support/service-fakes.js";

const PROPAGATION = "a new role assignment takes 1 to 5 minutes to take effect";

/** Stands in for the managed identity (Entra ID cannot be reached here; the credential path has its own test). */
const credential = {
  getToken: async (): Promise<AccessToken> => ({
    token: "managed-identity-token",
    expiresOnTimestamp: Date.now() + 3_600_000,
  }),
};

/** Runs `call` against a fake refusing as `refusal` does, and returns what it threw. */
async function refusedBy(
  refusal: Refusal,
  call: (fake: { url: string; ca: string }) => Promise<unknown>,
): Promise<unknown> {
  const fake = await startRefusalServer(refusal, { tls: refusal !== "blob" });
  try {
    await call(fake);
  } catch (error) {
    return error;
  } finally {
    await fake.close();
  }
  throw new Error("the call was not refused");
}

const blobCall = ({ url }: { url: string }) =>
  refusingBlobService(url).getContainerClient("jobapi-artifacts").createIfNotExists();

describe("Azure's authorization refusals name the missing role, its scope and the 1-5 minute propagation (B-247)", () => {
  it("B-247 AuthorizationPermissionMismatch from Blob storage: the blob data role on the storage account", async () => {
    const failure = describeCloudAuthorizationError(await refusedBy("blob", blobCall));
    expect(failure).toMatchObject({
      code: "AuthorizationPermissionMismatch",
      role: "Storage Blob Data Contributor",
      scope: "storage account 'blastplanework'",
    });
    expect(failure?.message).toContain(PROPAGATION);
    expect(failure?.message).not.toContain("127.0.0.1");
  });

  it("B-247 AuthorizationPermissionMismatch from Table storage: the table data role on the storage account", async () => {
    const error = await refusedBy("table", ({ url, ca }) =>
      new TableClient(`${url}/blastplaneplat`, "jobapijobs", credential, {
        tlsOptions: { ca },
        retryOptions: { maxRetries: 0 },
      }).createTable(),
    );
    expect(describeCloudAuthorizationError(error)).toMatchObject({
      code: "AuthorizationPermissionMismatch",
      role: "Storage Table Data Contributor",
      scope: "storage account 'blastplaneplat'",
    });
  });

  it("B-247 ForbiddenByRbac from Key Vault: Secrets User to read, Secrets Officer to write, on the vault", async () => {
    const store = ({ url, ca }: { url: string; ca: string }) =>
      createKeyVaultSecretStore({
        vaultUrl: url,
        credential,
        clientOptions: {
          tlsOptions: { ca },
          disableChallengeResourceVerification: true,
          retryOptions: { maxRetries: 0 },
        },
      });
    const read = describeCloudAuthorizationError(
      await refusedBy("keyvault-read", (fake) => store(fake).get("jobapi-token")),
    );
    expect(read).toMatchObject({
      code: "ForbiddenByRbac",
      role: "Key Vault Secrets User",
      scope: "key vault 'kv-blastplane'",
    });
    expect(read?.message).toContain(PROPAGATION);
    const write = describeCloudAuthorizationError(
      await refusedBy("keyvault-write", (fake) => store(fake).set("jobapi-token", "{}")),
    );
    expect(write).toMatchObject({
      code: "ForbiddenByRbac",
      role: "Key Vault Secrets Officer",
      scope: "key vault 'kv-blastplane'",
    });
  });

  it("B-247 AuthorizationFailed from Resource Manager: Contributor over the scope it names; User Access Administrator for role assignments; the cluster-user role for credentials", async () => {
    const arm = ({ url, ca }: { url: string; ca: string }) =>
      new ContainerServiceClient(credential, "00000000-0000-4000-8000-000000000001", {
        endpoint: url,
        tlsOptions: { ca },
        retryOptions: { maxRetries: 0 },
      });
    const read = describeCloudAuthorizationError(
      await refusedBy("arm", (fake) => arm(fake).managedClusters.get("rg-blastplane", "aks-blastplane")),
    );
    expect(read).toMatchObject({
      code: "AuthorizationFailed",
      role: "Contributor",
      scope:
        "/subscriptions/00000000-0000-4000-8000-000000000001/resourceGroups/rg-blastplane/providers/Microsoft.ContainerService/managedClusters/aks-blastplane",
    });
    expect(read?.message).toContain("Microsoft.ContainerService/managedClusters/read");
    expect(read?.message).toContain(PROPAGATION);
    const assign = describeCloudAuthorizationError(
      await refusedBy("arm-role-assignment", (fake) =>
        arm(fake).managedClusters.get("rg-blastplane", "aks-blastplane"),
      ),
    );
    expect(assign).toMatchObject({ code: "AuthorizationFailed", role: "User Access Administrator" });
    const credentials = describeCloudAuthorizationError(
      await refusedBy("arm-cluster-credentials", (fake) =>
        arm(fake).managedClusters.listClusterUserCredentials("rg-blastplane", "aks-blastplane"),
      ),
    );
    expect(credentials).toMatchObject({
      code: "AuthorizationFailed",
      role: "Azure Kubernetes Service Cluster User Role",
    });
  });

  it("B-247 Forbidden from the cluster's API server: the cluster-user role, on the cluster and namespace", async () => {
    const error = await refusedBy("kubernetes", async ({ url, ca }) => {
      const kc = new KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: "aks", server: url, caData: Buffer.from(ca).toString("base64") }],
        users: [{ name: "jobapi", token: "service-account-token" }],
        contexts: [{ name: "aks", cluster: "aks", user: "jobapi" }],
        currentContext: "aks",
      });
      await kc.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: "blastplane" });
    });
    const failure = describeCloudAuthorizationError(error);
    expect(failure).toMatchObject({
      code: "Forbidden",
      role: "Azure Kubernetes Service Cluster User Role",
      scope: "the cluster (namespace 'blastplane')",
    });
    expect(failure?.message).toContain('cannot list resource "jobs"');
    expect(failure?.message).toContain(PROPAGATION);
  });

  it("B-247 B-230 a route whose call Azure refuses answers 502 with the role message (not the catch-all text) and logs Azure's code", async () => {
    const error = await refusedBy("keyvault-write", ({ url, ca }) =>
      createKeyVaultSecretStore({
        vaultUrl: url,
        credential,
        clientOptions: {
          tlsOptions: { ca },
          disableChallengeResourceVerification: true,
          retryOptions: { maxRetries: 0 },
        },
      }).set("jobapi-token", "{}"),
    );
    const logger = captureLogger();
    const result = mapErrorToResult(error, "req-12345678", logger);
    expect(result.status).toBe(502);
    expect(result.jsonBody).toEqual({
      detail: expect.stringMatching(
        /^ForbiddenByRbac: .*Key Vault Secrets Officer role on key vault 'kv-blastplane' \(a new role assignment takes 1 to 5 minutes to take effect\)$/,
      ),
      request_id: "req-12345678",
    });
    expect(logger.entries).toContainEqual(
      expect.objectContaining({
        level: "error",
        fields: expect.objectContaining({ error_code: "ForbiddenByRbac", role: "Key Vault Secrets Officer" }),
      }),
    );
  });

  it("leaves other failures alone: a 404, a 403 that is not a role refusal, a plain error", () => {
    expect(
      describeCloudAuthorizationError(Object.assign(new Error("gone"), { statusCode: 404, code: "ContainerNotFound" })),
    ).toBeUndefined();
    expect(
      describeCloudAuthorizationError(
        Object.assign(new Error("no"), { statusCode: 403, code: "AuthenticationFailed" }),
      ),
    ).toBeUndefined();
    expect(describeCloudAuthorizationError(new Error("AuthorizationFailed"))).toBeUndefined();
  });

  it("B-247 an operation's activity fails with the one-line role message, which the operation's error keeps whole", async () => {
    const activity = explainCloudAuthorization(async (fake: { url: string; ca: string }) => blobCall(fake));
    const error = await refusedBy("blob", (fake) => activity(fake));
    expect(error).toBeInstanceOf(CloudAuthorizationError);
    const message = (error as Error).message;
    // The operation's orchestrator keeps the first line of the activity's message.
    expect(message.split("\n")[0]).toBe(message);
    expect(message).toMatch(
      /^AuthorizationPermissionMismatch: the managed identity has no blob data role on storage account 'blastplanework'; assign it the Storage Blob Data Contributor role on storage account 'blastplanework' \(a new role assignment takes 1 to 5 minutes to take effect\)$/,
    );
  });
});

describe("a job whose shard storage refuses the identity fails with the role message in its error", () => {
  let azurite: RunningAzurite;
  let dir: string;

  beforeAll(async () => {
    azurite = await testAzurite();
    dir = mkdtempSync(path.join(os.tmpdir(), "blastplane-authz-"));
  });

  afterAll(async () => {
    await azurite?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("B-247 AuthorizationPermissionMismatch while a shard publishes its output: the job's error names the blob data role, once, without retrying", async () => {
    const fake = await startRefusalServer("blob", { tls: false });
    try {
      // A shard that publishes its own output, as the cluster's shard worker does, with a real Blob client refused by the fake.
      const { dispatcher, finish, attempts } = await refusedShardDispatcher(azurite.connectionString, dir, fake.url);
      await dispatcher.start();
      try {
        const failed = await finish(testJobRecord());
        expect(failed.status).toBe("failed");
        expect(failed.error).toContain(
          "AuthorizationPermissionMismatch: the managed identity has no blob data role on storage account 'blastplanework'",
        );
        expect(failed.error).toContain("Storage Blob Data Contributor");
        expect(failed.error).toContain(PROPAGATION);
        expect(failed.error).not.toContain("127.0.0.1");
        // Another attempt would be refused the same way until the role is assigned.
        expect(attempts()).toBe(1);
      } finally {
        await dispatcher.stop();
      }
    } finally {
      await fake.close();
    }
  });
});
