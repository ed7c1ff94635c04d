import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { azureCredential } from "../../shared/auth/azure-credential.js";

const root = path.resolve(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return readdirSync(path.join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && /\.(ts|tsx)$/.test(entry.name))
    .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)));
}

describe("one Azure credential per process", () => {
  it("azureCredential answers the same cached credential for the same identity (one token cache for storage, Key Vault and the console)", () => {
    expect(azureCredential()).toBe(azureCredential());
    expect(azureCredential("client-a")).toBe(azureCredential("client-a"));
    expect(azureCredential("client-a")).not.toBe(azureCredential("client-b"));
  });

  it("no product module but shared/auth/azure-credential.ts builds an identity credential of its own", () => {
    const builds = /\b(?:DefaultAzureCredential|ManagedIdentityCredential|WorkloadIdentityCredential)\s*\(/;
    const offending = ["functions", "shared", "jobapi", "local"]
      .flatMap(sources)
      .filter((file) => file !== path.join("shared", "auth", "azure-credential.ts"))
      .filter((file) => builds.test(readFileSync(path.join(root, file), "utf8")));
    expect(offending).toEqual([]);
  });
});
