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

describe("the caller's bearer token stays at the door", () => {
  const product = () => ["functions", "shared", "jobapi", "local", path.join("web", "src")].flatMap(sources);

  it("B-193 no module performs an on-behalf-of exchange (no OBO credential, no jwt-bearer grant, no on_behalf_of token use)", () => {
    const obo = /OnBehalfOf|grant-type:jwt-bearer|on_behalf_of/;
    // The one mention: the Teams replies' token provider implements the Agents SDK's OBO entry point as a refusal.
    const refusal = "acquireTokenOnBehalfOf: unsupported,";
    const teamsReply = path.join("shared", "channels", "platform-a", "teams-reply.ts");
    expect(readFileSync(path.join(root, teamsReply), "utf8")).toContain(refusal);
    const offending = product().flatMap((file) =>
      readFileSync(path.join(root, file), "utf8")
        .split("\n")
        .filter((line) => obo.test(line) && !(file === teamsReply && line.trim() === refusal))
        .map((line) => `${file}: ${line.trim()}`),
    );
    expect(offending).toEqual([]);
  });

  it("B-192 only the bearer validator's call sites read a request's Authorization header, so the token is never forwarded to a cloud call", () => {
    const reads = /headers\.get\(\s*["']authorization["']\s*\)|header\(\s*["']authorization["']\s*\)/i;
    const readers = product().filter((file) => reads.test(readFileSync(path.join(root, file), "utf8")));
    expect(readers.sort()).toEqual(
      [
        // The route kit hands it to authorize() and gives handlers the validated caller only.
        path.join("functions", "composition", "http-route.ts"),
        // GET /api/me validates it and answers the caller.
        path.join("functions", "me.ts"),
        // Bot Service's own token to the Teams channel (verified there), not a dashboard user's.
        path.join("shared", "channels", "platform-a", "teams-messages.ts"),
      ].sort(),
    );
    for (const file of readers) {
      const text = readFileSync(path.join(root, file), "utf8");
      for (const line of text.split("\n").filter((l) => reads.test(l)))
        expect(line, file).toMatch(/validat|verif|authorize\(|localAnonymous/);
    }
  });
});
