import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { servingCertificate } from "../../local/kube/cluster.js";
import { startManagedIdentityServer } from "../fakes/managed-identity-server.js";
import { startTestAzurite } from "../support/service-fakes.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const TENANT = "5f3c2b1a-0000-4000-8000-00000000beef";
const CLIENT_ID = "1d4e3c52-0000-4000-8000-000000000001";
// Shaped like real secrets; a refusal must never repeat them.
const KEY = "c2VjcmV0LWFjY291bnQta2V5LXRoYXQtbXVzdC1uZXZlci1iZS1wcmludGVk";
const SIG = "sv=2024-11-04&ss=bt&srt=sco&sp=rwdlac&se=2030-01-01T00:00:00Z&sig=U2lnbmF0dXJlVGhhdE11c3ROb3RMZWFr";
const KEY_STRING = `DefaultEndpointsProtocol=https;AccountName=prodaccount;AccountKey=${KEY};EndpointSuffix=core.windows.net`;
const SAS_STRING = `BlobEndpoint=https://prodaccount.blob.core.windows.net;TableEndpoint=https://prodaccount.table.core.windows.net;SharedAccessSignature=${SIG}`;
const CREDENTIALS = [
  ["an account key", KEY_STRING, "holds an account key"],
  ["a SAS", SAS_STRING, "holds a SAS"],
] as const;

interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `node <args>` with exactly `env` (plus PATH) and resolves with how it ended. */
async function run(args: string[], env: Record<string, string>): Promise<Exit> {
  return promisify(execFile)(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    timeout: 60_000,
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number | null; stdout: string; stderr: string }) => ({
      code: error.code,
      stdout: error.stdout,
      stderr: error.stderr,
    }),
  );
}

function expectRefused(exit: Exit, setting: string, holds: string, prefix: string): void {
  expect(exit.code).toBe(1);
  expect(exit.stderr).toContain(
    `${prefix}invalid configuration: ${setting}: ${holds}; a connection string is accepted only for the local Azurite`,
  );
  expect(exit.stderr + exit.stdout).not.toContain(KEY);
  expect(exit.stderr + exit.stdout).not.toContain("U2lnbmF0dXJl");
}

describe("outside local mode, every deployable refuses to start with a storage key or SAS", () => {
  it.each(CREDENTIALS)("B-219: the Functions app refuses %s in AzureWebJobsStorage", async (_, value, holds) => {
    const exit = await run(
      [path.join(ROOT, "scripts/import-probe.mjs"), "--functions", path.join(ROOT, "dist/functions/index.js")],
      {
        AzureWebJobsStorage: value,
        AUTH_TENANT_ID: "tenant",
        AUTH_CLIENT_ID: "client",
      },
    );
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toContain(
      `invalid configuration: AzureWebJobsStorage: ${holds}; a connection string is accepted only for the local Azurite`,
    );
    expect(exit.stderr).toContain("set AzureWebJobsStorage__accountName");
    expect(exit.stderr + exit.stdout).not.toContain(KEY);
    expect(exit.stderr + exit.stdout).not.toContain("U2lnbmF0dXJl");
  });

  it("B-195: the Functions app loads and registers its functions with the host's identity-based storage settings and no connection string", async () => {
    const exit = await run(
      [path.join(ROOT, "scripts/import-probe.mjs"), "--functions", path.join(ROOT, "dist/functions/index.js")],
      {
        AzureWebJobsStorage__accountName: "blastplaneplat",
        AzureWebJobsStorage__credential: "managedidentity",
        AzureWebJobsStorage__clientId: CLIENT_ID,
        AUTH_TENANT_ID: "tenant",
        AUTH_CLIENT_ID: "client",
        // Outside the local stack an A2 channel on operational_alert is required (spec §8).
        SVC_WEBHOOK_URL: "https://hooks.example/blastplane",
        SVC_WEBHOOK_SECRET_REF: "kv:webhook-secret",
      },
    );
    expect(exit.stderr).toBe("");
    expect(exit.code).toBe(0);
    const names = (JSON.parse(exit.stdout) as { functions: { name: string }[] }).functions.map((f) => f.name);
    expect(names).toContain("databaseUpdateCheckTimer");
  });

  it("C-525 the Functions app outside the local stack refuses to start without a registered A2 channel on operational_alert", async () => {
    const exit = await run(
      [path.join(ROOT, "scripts/import-probe.mjs"), "--functions", path.join(ROOT, "dist/functions/index.js")],
      {
        AzureWebJobsStorage__accountName: "blastplaneplat",
        AzureWebJobsStorage__credential: "managedidentity",
        AzureWebJobsStorage__clientId: CLIENT_ID,
        AUTH_TENANT_ID: "tenant",
        AUTH_CLIENT_ID: "client",
      },
    );
    expect(exit.code).not.toBe(0);
    expect(exit.stderr).toContain(
      "notification_route_unavailable: no registered channel supporting A2 on operational_alert",
    );
  });

  it.each(CREDENTIALS)("B-219: the job API refuses %s in JOBAPI_STORAGE_CONNECTION_STRING", async (_, value, holds) => {
    const exit = await run([path.join(ROOT, "dist/jobapi/server.js")], {
      JOBAPI_STORAGE_CONNECTION_STRING: value,
      JOBAPI_PORT: "0",
      JOBAPI_DATA_DIR: os.tmpdir(),
    });
    expectRefused(exit, "JOBAPI_STORAGE_CONNECTION_STRING", holds, "job API failed to start: ");
  });

  it.each(CREDENTIALS)(
    "B-219: the shard worker refuses %s in SHARD_STORAGE_CONNECTION_STRING",
    async (_, value, holds) => {
      const exit = await run([path.join(ROOT, "dist/jobapi/shard.js"), "blastn", "-db", "demo"], {
        SHARD_JOB_ID: "tz1doyvc4e87",
        SHARD_ID: "b0-p1",
        SHARD_BATCH: "0",
        SHARD_DB_CACHE_ROOT: os.tmpdir(),
        SHARD_DB_NAME: "demo",
        SHARD_DB_RELEASE: "2026-11-22-04-41-01",
        SHARD_QUERY_FILE: "/scratch/query.fa",
        SHARD_OUTPUT_FILE: "/scratch/out.xml",
        SHARD_STORAGE_CONNECTION_STRING: value,
      });
      expectRefused(exit, "SHARD_STORAGE_CONNECTION_STRING", holds, "shard failed: ");
    },
  );
});

describe("the managed identity path: DefaultAzureCredential's token on every storage call, against Azurite with OAuth", () => {
  let dir: string;
  let azurite: RunningAzurite;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "blastplane-identity-"));
    servingCertificate(dir);
    azurite = await startTestAzurite({
      oauth: { certPath: path.join(dir, "apiserver.crt"), keyPath: path.join(dir, "apiserver.key") },
    });
  });

  afterAll(async () => {
    for (const child of children) child.kill("SIGKILL");
    await azurite?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Starts the job API with identity-based storage and the App Service managed identity env; resolves with its URL, or its exit. */
  function startJobApi(
    identity: { url: string; identityHeader: string },
    dataDir: string,
  ): Promise<{ url: string } | Exit> {
    const child = spawn(process.execPath, [path.join(ROOT, "dist/jobapi/server.js")], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        JOBAPI_PORT: "0",
        JOBAPI_DATA_DIR: dataDir,
        JOBAPI_STORAGE_BLOB_URL: azurite.blobEndpoint,
        JOBAPI_STORAGE_TABLE_URL: azurite.tableEndpoint,
        // What Azure Functions / App Service give a process with a managed identity.
        IDENTITY_ENDPOINT: identity.url,
        IDENTITY_HEADER: identity.identityHeader,
        AZURE_CLIENT_ID: CLIENT_ID,
        // The TLS certificate Azurite serves (Azure's are publicly trusted).
        NODE_EXTRA_CA_CERTS: path.join(dir, "apiserver.crt"),
      },
    });
    children.push(child);
    let stdout = "";
    let stderr = "";
    return new Promise((resolve) => {
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        const ready = stdout.split("\n").find((line) => line.includes('"job API ready"'));
        if (ready) resolve({ url: (JSON.parse(ready) as { url: string }).url });
      });
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.once("exit", (code) => resolve({ code, stdout, stderr }));
    });
  }

  it("B-195: the job API opens its tables and container with the identity's bearer token, for the storage audience and the user-assigned client id", async () => {
    const identity = await startManagedIdentityServer({ tenantId: TENANT });
    try {
      const started = await startJobApi(identity, path.join(dir, "ok"));
      if (!("url" in started)) throw new Error(`the job API did not start:\n${started.stderr}`);
      // Its readiness reads storage again through the same credential.
      const ready = await fetch(`${started.url}/v1/ready`);
      const body = (await ready.json()) as { checks: Record<string, unknown> };
      expect(body.checks).toMatchObject({ storage: "ok" });
      expect(identity.requests.length).toBeGreaterThan(0);
      for (const request of identity.requests) {
        expect(request).toEqual({
          resource: "https://storage.azure.com",
          clientId: CLIENT_ID,
          apiVersion: "2019-08-01",
          identityHeader: identity.identityHeader,
        });
      }
    } finally {
      await identity.close();
    }
  });

  it("B-195: the shard worker reaches Blob storage at SHARD_STORAGE_BLOB_URL with the identity's token", async () => {
    const identity = await startManagedIdentityServer({ tenantId: TENANT });
    try {
      const exit = await run([path.join(ROOT, "dist/jobapi/shard.js"), "blastn", "-db", "demo"], {
        SHARD_JOB_ID: "tz1doyvc4e87",
        SHARD_ID: "b0-p1",
        SHARD_BATCH: "0",
        SHARD_DB_CACHE_ROOT: dir,
        SHARD_DB_NAME: "demo",
        SHARD_DB_RELEASE: "2026-11-22-04-41-01",
        SHARD_QUERY_FILE: path.join(dir, "query.fa"),
        SHARD_OUTPUT_FILE: path.join(dir, "out.xml"),
        SHARD_STORAGE_BLOB_URL: azurite.blobEndpoint,
        IDENTITY_ENDPOINT: identity.url,
        IDENTITY_HEADER: identity.identityHeader,
        AZURE_CLIENT_ID: CLIENT_ID,
        NODE_EXTRA_CA_CERTS: path.join(dir, "apiserver.crt"),
      });
      // Its calls were authorized: storage answered that this shard's output is not published, and
      // then that the release's manifest is absent (nothing was published to this account), so the
      // worker could not fill the node's cache. A refused token would have named the missing role.
      expect(exit.stderr).toContain("shard failed: database demo release 2026-11-22-04-41-01 is not published");
      expect(identity.requests).toContainEqual({
        resource: "https://storage.azure.com",
        clientId: CLIENT_ID,
        apiVersion: "2019-08-01",
        identityHeader: identity.identityHeader,
      });
    } finally {
      await identity.close();
    }
  });

  it("B-195: storage checks the token: one for another audience leaves the job API unable to start", async () => {
    const identity = await startManagedIdentityServer({ tenantId: TENANT, audience: "https://vault.azure.net" });
    try {
      const started = await startJobApi(identity, path.join(dir, "wrong-audience"));
      expect("url" in started).toBe(false);
      const exit = started as Exit;
      expect(exit.code).toBe(1);
      // Its first storage calls go out at once and whichever is refused first stops it: Azurite answers
      // a wrong audience either naming it or with its generic authentication failure (seen both ways).
      expect(exit.stderr).toMatch(
        /job API failed to start: [\s\S]*(Invalid token audience|Server failed to authenticate the request)/,
      );
      expect(identity.requests.length).toBeGreaterThan(0);
      for (const token of identity.issued) expect(exit.stderr + exit.stdout).not.toContain(token);
    } finally {
      await identity.close();
    }
  });
});
