import { describe, expect, it } from "vitest";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { loadConfig } from "../../shared/config/load-config.js";
import { openBlobServiceClient } from "../../shared/storage/blob-service.js";
import { openTableClient } from "../../shared/storage/storage-connection.js";
import { configRefusal } from "../support/helpers.js";

const AUTH = { AUTH_TENANT_ID: "tenant", AUTH_CLIENT_ID: "client" };
// Shaped like real secrets; none may appear in a refusal.
const KEY = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1uZXZlci1iZS1wcmludGVk";
const SIG = "sv=2024-11-04&ss=bt&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=U2lnbmF0dXJlVGhhdE11c3ROb3RMZWFr";
const KEY_STRING = `DefaultEndpointsProtocol=https;AccountName=prodaccount;AccountKey=${KEY};EndpointSuffix=core.windows.net`;
const SAS_STRING = `BlobEndpoint=https://prodaccount.blob.core.windows.net;TableEndpoint=https://prodaccount.table.core.windows.net;SharedAccessSignature=${SIG}`;
const AZURITE =
  "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;TableEndpoint=http://127.0.0.1:10002/devstoreaccount1;";
const refusal = configRefusal;

describe("storage outside local mode: the managed identity, never a key or SAS (B-195, B-219)", () => {
  it("B-219: the Functions app refuses an account key or a SAS, naming the setting and the identity settings to use, never the value", () => {
    for (const [value, holds] of [
      [KEY_STRING, "holds an account key"],
      [SAS_STRING, "holds a SAS"],
    ] as const) {
      const error = refusal(() => loadConfig({ ...AUTH, AzureWebJobsStorage: value }));
      expect(error.problems).toHaveLength(1);
      expect(error.problems[0]).toMatch(
        new RegExp(`^AzureWebJobsStorage: ${holds}; a connection string is accepted only for the local Azurite`),
      );
      expect(error.message).toContain("AzureWebJobsStorage__accountName");
      expect(error.message).not.toContain(KEY);
      expect(error.message).not.toContain("U2lnbmF0dXJl");
      expect(error.message).not.toContain("prodaccount");
    }
  });

  it("B-219: the job API refuses an account key or a SAS in its connection string, and a SAS on an account URL", () => {
    expect(refusal(() => loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: KEY_STRING }, "/")).problems[0]).toMatch(
      /^JOBAPI_STORAGE_CONNECTION_STRING: holds an account key; .* set JOBAPI_STORAGE_ACCOUNT_NAME \(or JOBAPI_STORAGE_BLOB_URL and JOBAPI_STORAGE_TABLE_URL\) instead$/,
    );
    expect(refusal(() => loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: SAS_STRING }, "/")).problems[0]).toMatch(
      /^JOBAPI_STORAGE_CONNECTION_STRING: holds a SAS; /,
    );
    const sasUrl = refusal(() =>
      loadJobApiConfig(
        {
          JOBAPI_STORAGE_BLOB_URL: `https://prodaccount.blob.core.windows.net/?${SIG}`,
          JOBAPI_STORAGE_TABLE_URL: "https://prodaccount.table.core.windows.net",
        },
        "/",
      ),
    );
    expect(sasUrl.problems).toEqual([expect.stringMatching(/^JOBAPI_STORAGE_BLOB_URL: holds a SAS; /)]);
    expect(sasUrl.message).not.toContain("U2lnbmF0dXJl");
    const sasString = refusal(() =>
      loadConfig({
        ...AUTH,
        AzureWebJobsStorage__blobServiceUri: `https://a.blob.core.windows.net?${SIG}`,
        AzureWebJobsStorage__tableServiceUri: "https://a.table.core.windows.net",
      }),
    );
    expect(sasString.problems).toEqual([expect.stringMatching(/^AzureWebJobsStorage__blobServiceUri: holds a SAS; /)]);
  });

  it("accepts a connection string whose endpoints are all on this machine (Azurite: local mode)", () => {
    for (const value of [AZURITE, "UseDevelopmentStorage=true"]) {
      const config = loadConfig({ ...AUTH, AzureWebJobsStorage: value });
      expect(config.storage).toEqual({ kind: "connection-string", connectionString: value });
      expect(config.storageConnectionString).toBe(value);
      expect(loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: value }, "/").storage.kind).toBe("connection-string");
    }
    // A key string that names one endpoint beyond this machine is not local mode.
    const mixed = AZURITE.replace(
      "http://127.0.0.1:10002/devstoreaccount1",
      "https://prodaccount.table.core.windows.net",
    );
    expect(refusal(() => loadConfig({ ...AUTH, AzureWebJobsStorage: mixed })).problems[0]).toMatch(
      /^AzureWebJobsStorage: holds an account key; /,
    );
  });

  it("B-195: the Functions host's identity-based settings: account URLs from the account name, the user-assigned client id", () => {
    const config = loadConfig({
      ...AUTH,
      AzureWebJobsStorage__accountName: "blastplanest01",
      AzureWebJobsStorage__credential: "managedidentity",
      AzureWebJobsStorage__clientId: "1d4e3c52-0000-4000-8000-000000000001",
    });
    expect(config.storage).toEqual({
      kind: "identity",
      blobUrl: "https://blastplanest01.blob.core.windows.net",
      tableUrl: "https://blastplanest01.table.core.windows.net",
      queueUrl: "https://blastplanest01.queue.core.windows.net",
      clientId: "1d4e3c52-0000-4000-8000-000000000001",
    });
    // Code written for connection strings fails loudly rather than look for a key.
    expect(() => config.storageConnectionString).toThrow(/managed identity/);
    expect(JSON.stringify(config)).not.toContain("storageConnectionString");
    const explicit = loadConfig({
      ...AUTH,
      AzureWebJobsStorage__blobServiceUri: "https://b.example.net/",
      AzureWebJobsStorage__tableServiceUri: "https://t.example.net",
    });
    expect(explicit.storage).toMatchObject({
      blobUrl: "https://b.example.net",
      tableUrl: "https://t.example.net",
      queueUrl: undefined,
    });
  });

  it("names each missing or malformed identity setting, in the order the schema declares its settings", () => {
    expect(refusal(() => loadConfig({})).message).toBe(
      "invalid configuration: AzureWebJobsStorage: is required; AUTH_TENANT_ID: is required; AUTH_CLIENT_ID: is required",
    );
    expect(
      refusal(() =>
        loadConfig({
          AzureWebJobsStorage__blobServiceUri: "http://b.example.net",
          AzureWebJobsStorage__credential: "connectionstring",
        }),
      ).problems,
    ).toEqual([
      "AzureWebJobsStorage__blobServiceUri: must be an https URL (the managed identity's token is sent only over TLS)",
      "AzureWebJobsStorage__tableServiceUri: is required (or AzureWebJobsStorage__accountName)",
      "AzureWebJobsStorage__credential: must be managedidentity",
      "AUTH_TENANT_ID: is required",
      "AUTH_CLIENT_ID: is required",
    ]);
    expect(refusal(() => loadJobApiConfig({ JOBAPI_STORAGE_ACCOUNT_NAME: "Not_An_Account" }, "/")).problems).toEqual([
      "JOBAPI_STORAGE_ACCOUNT_NAME: must be a storage account name (3-24 lowercase letters or digits)",
    ]);
    expect(loadJobApiConfig({ JOBAPI_STORAGE_ACCOUNT_NAME: "workload01" }, "/").storage).toMatchObject({
      kind: "identity",
      blobUrl: "https://workload01.blob.core.windows.net",
    });
  });

  it("the one client factory refuses a key or SAS connection string passed past the configuration", () => {
    expect(() => openTableClient(KEY_STRING, "jobs")).toThrow(/holds an account key/);
    expect(() => openBlobServiceClient(SAS_STRING)).toThrow(/holds a SAS/);
    expect(openTableClient(AZURITE, "jobs").url).toBe("http://127.0.0.1:10002/devstoreaccount1");
    const identity = {
      kind: "identity",
      blobUrl: "https://a.blob.core.windows.net",
      tableUrl: "https://a.table.core.windows.net",
      queueUrl: undefined,
      clientId: undefined,
    } as const;
    expect(openTableClient(identity, "jobs").url).toBe("https://a.table.core.windows.net");
    expect(openBlobServiceClient(identity).url).toBe("https://a.blob.core.windows.net/");
  });
});
