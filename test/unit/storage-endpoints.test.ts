import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { describe, expect, it } from "vitest";
import { isLoopbackUrl, storageClientOptions, storageEndpoint } from "../../shared/storage/endpoints.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
// Azurite's published development key: not a secret.
const KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const azurite = (host: string) =>
  `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};BlobEndpoint=http://${host}:10000/devstoreaccount1;TableEndpoint=http://${host}:10002/devstoreaccount1;`;

describe("storage endpoints: plain HTTP only on this machine", () => {
  it("knows loopback hosts", () => {
    for (const url of [
      "http://127.0.0.1:10002/a",
      "http://127.1.2.3/",
      "http://localhost:7071",
      "http://[::1]:10000/x",
      "https://localhost",
    ]) {
      expect(isLoopbackUrl(url), url).toBe(true);
    }
    for (const url of [
      "http://10.0.0.4:10002",
      "http://127.0.0.1.example.com/",
      "http://localhost.example.com",
      "https://acct.table.core.windows.net",
      "ftp://127.0.0.1/",
      "not a url",
      "http://0.0.0.0:10002",
    ]) {
      expect(isLoopbackUrl(url), url).toBe(false);
    }
  });

  it("reads the endpoint a connection string names", () => {
    expect(storageEndpoint(azurite("127.0.0.1"), "table")).toBe("http://127.0.0.1:10002/devstoreaccount1");
    expect(storageEndpoint(azurite("127.0.0.1"), "blob")).toBe("http://127.0.0.1:10000/devstoreaccount1");
    expect(storageEndpoint("UseDevelopmentStorage=true", "table")).toBe("http://127.0.0.1:10002/devstoreaccount1");
    expect(
      storageEndpoint("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://storage.example.com", "table"),
    ).toBe("http://storage.example.com");
    expect(
      storageEndpoint(
        `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY};EndpointSuffix=core.windows.net`,
        "table",
      ),
    ).toBe("https://acct.table.core.windows.net");
    expect(storageEndpoint(`AccountName=acct;AccountKey=${KEY}`, "blob")).toBe("https://acct.blob.core.windows.net");
    expect(storageEndpoint("SharedAccessSignature=sv=x", "table")).toBeUndefined();
  });

  it("grants allowInsecureConnection for Azurite on loopback only, keeping the caller's options", () => {
    expect(storageClientOptions(azurite("127.0.0.1"))).toEqual({ allowInsecureConnection: true });
    expect(storageClientOptions("UseDevelopmentStorage=true")).toEqual({ allowInsecureConnection: true });
    expect(storageClientOptions("http://localhost:10002/devstoreaccount1")).toEqual({ allowInsecureConnection: true });
    expect(storageClientOptions(azurite("10.1.2.3"))).toEqual({ allowInsecureConnection: false });
    expect(storageClientOptions(`DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=${KEY}`)).toEqual({
      allowInsecureConnection: false,
    });
    expect(
      storageClientOptions("UseDevelopmentStorage=true;DevelopmentStorageProxyUri=http://storage.example.com"),
    ).toEqual({ allowInsecureConnection: false });
    expect(storageClientOptions(azurite("127.0.0.1"), { retryOptions: { maxRetries: 2 } })).toEqual({
      retryOptions: { maxRetries: 2 },
      allowInsecureConnection: true,
    });
  });

  it("so the SDK refuses a plain-HTTP endpoint across the network before sending anything", async () => {
    const connectionString = azurite("192.0.2.10");
    const client = TableClient.fromConnectionString(
      connectionString,
      "jobs",
      storageClientOptions(connectionString, { retryOptions: { maxRetries: 0 } }),
    );
    await expect(client.createTable()).rejects.toThrow(/allowInsecureConnection is false/);
  });

  it("no production source hard-codes allowInsecureConnection", () => {
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const entry of readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
        const relative = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(relative);
        else if (
          /\.(ts|mjs|js|cjs)$/.test(entry.name) &&
          /allowInsecureConnection\s*:\s*true/.test(readFileSync(path.join(ROOT, relative), "utf8"))
        ) {
          offenders.push(relative);
        }
      }
    };
    for (const dir of ["functions", "jobapi", "local", "shared"]) walk(dir);
    expect(offenders).toEqual([]);
  });
});
