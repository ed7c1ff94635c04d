import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalFunctionsHost } from "../../local/functions-host.js";
import { createLogger } from "../../shared/logging/logger.js";
import { unzip } from "../support/jobapi-client.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const work = mkdtempSync(path.join(tmpdir(), "bp-functions-package-"));
const app = path.join(work, "app");
let entries: Map<string, Buffer>;
let server: http.Server | undefined;

beforeAll(async () => {
  // The global setup built dist/; this is `npm run package`'s second step.
  await promisify(execFile)(process.execPath, [path.join(ROOT, "scripts/package.mjs")], { cwd: ROOT });
  entries = await unzip(readFileSync(path.join(ROOT, "dist/blastplane-api.zip")));
  for (const [name, bytes] of entries) {
    if (name.endsWith("/")) continue;
    mkdirSync(path.dirname(path.join(app, name)), { recursive: true });
    writeFileSync(path.join(app, name), bytes);
  }
}, 120_000);

afterAll(() => {
  server?.close();
  rmSync(work, { recursive: true, force: true });
});

describe("npm run package: the Functions deployment zip is complete", () => {
  it("holds the bundle, host.json, the config/ catalogs, a package.json naming the entry, and only the external modules", () => {
    const names = [...entries.keys()];
    expect(names).toContain("host.json");
    expect(names).toContain("dist/functions/index.js");
    for (const catalog of ["ops-rules.json", "action-types.json", "approval-load.yaml"])
      expect(names).toContain(`dist/functions/config/${catalog}`);
    const manifest = JSON.parse(entries.get("package.json")?.toString("utf8") ?? "{}");
    expect(manifest.main).toBe("dist/functions/index.js");
    expect(Object.keys(manifest.dependencies)).toEqual(["playwright-core", "swagger-ui-dist"]);
    const modules = new Set(names.filter((n) => n.startsWith("node_modules/")).map((n) => n.split("/")[1]));
    expect([...modules]).toEqual(["playwright-core", "swagger-ui-dist"]);
    // No repository sources, tests, local settings or data travel with it.
    expect(names.filter((n) => /^(shared|functions|local|test|\.data)\/|local\.settings\.json$/.test(n))).toEqual([]);
  });

  it("the local Functions host starts from the unzipped folder alone and serves the app's routes", async () => {
    expect(existsSync(path.join(app, "config"))).toBe(false);
    // The settings a deployment gives the app (Azurite stands in for the identity-based storage here).
    Object.assign(process.env, {
      AzureWebJobsStorage: "UseDevelopmentStorage=true",
      AUTH_TENANT_ID: "00000000-0000-0000-0000-000000000001",
      AUTH_CLIENT_ID: "00000000-0000-0000-0000-000000000002",
    });
    const cwd = process.cwd();
    process.chdir(app);
    const host = new LocalFunctionsHost({ logger: createLogger({ level: "error", write: () => {} }) });
    try {
      await host.load(path.join(app, "dist/functions/index.js"));
    } finally {
      process.chdir(cwd);
    }
    expect(host.registry.functions.size).toBeGreaterThan(20);
    server = http.createServer(host.handleHttp);
    await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    const res = await fetch(`http://127.0.0.1:${port}/api/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ status: "ok", service: "blastplane-functions" });
    // The schema UI's files come from the package's own node_modules.
    const asset = await fetch(`http://127.0.0.1:${port}/api/docs/swagger-ui.css`);
    expect(asset.status).toBe(200);
  });
});
