import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import SwaggerParser from "@apidevtools/swagger-parser";
import { afterAll, describe, expect, it, vi } from "vitest";

const root = path.resolve(import.meta.dirname, "../..");
const fixtures = path.join(root, "test/fixtures");
/** The committed descriptions; other tests hold each equal to what its API serves. */
const DESCRIPTIONS = {
  "job API": "jobapi-openapi.json",
  "dashboard API": "dashboard-openapi.json",
} as const;

const work = mkdtempSync(path.join(tmpdir(), "api-descriptions-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

type Document = {
  servers?: unknown[];
  info: { license?: unknown };
  paths: Record<string, Record<string, Operation>>;
};
type Operation = {
  operationId?: string;
  security?: unknown[];
  responses: Record<string, { headers?: Record<string, unknown>; content?: Record<string, { schema?: unknown }> }>;
};

const load = (file: string) => JSON.parse(readFileSync(path.join(fixtures, file), "utf8")) as Document;
const operations = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([p, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ where: `${method.toUpperCase()} ${p}`, op })),
  );

/** `redocly lint` as a developer runs it, offline: the repository's redocly.yaml (recommended), no telemetry. */
async function redoclyLint(file: string): Promise<{ errors: number; warnings: number; problems: string[] }> {
  const copy = path.join(work, file);
  writeFileSync(copy, readFileSync(path.join(fixtures, file)));
  const run = await promisify(execFile)(
    path.join(root, "node_modules/.bin/redocly"),
    ["lint", copy, "--config", path.join(root, "redocly.yaml"), "--format", "json"],
    { cwd: work, env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" } },
  ).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
  const report = JSON.parse(run.stdout) as {
    totals: { errors: number; warnings: number };
    problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
  };
  return {
    errors: report.totals.errors,
    warnings: report.totals.warnings,
    problems: report.problems.map((p) => `${p.ruleId} ${p.location[0]?.pointer ?? ""}: ${p.message}`),
  };
}

describe.each(Object.entries(DESCRIPTIONS))("the %s description", (_name, file) => {
  it("B-175 passes redocly lint (recommended) with 0 errors and 0 warnings", async () => {
    const result = await redoclyLint(file);
    expect(result.problems).toEqual([]);
    expect(result).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it("B-175 is a valid OpenAPI 3.1 document (swagger-parser validate)", async () => {
    await expect(SwaggerParser.validate(load(file) as never)).resolves.toBeDefined();
  });

  it("names servers and a license; every operation has an operationId and states its security", () => {
    const doc = load(file);
    expect(doc.servers?.length).toBeGreaterThan(0);
    expect(doc.info.license).toBeDefined();
    for (const { where, op } of operations(doc)) {
      expect(op.operationId, where).toMatch(/^[a-zA-Z]+$/);
      expect(op.security, where).toBeDefined();
    }
  });

  it("every authenticated operation lists 401; every JSON response has a schema; every response declares X-Request-Id", () => {
    for (const { where, op } of operations(load(file))) {
      if ((op.security ?? []).length > 0) expect(op.responses["401"], where).toBeDefined();
      for (const [status, response] of Object.entries(op.responses)) {
        expect(response.headers?.["X-Request-Id"], `${where} ${status}`).toBeDefined();
        for (const [type, media] of Object.entries(response.content ?? {}))
          if (type.includes("json")) expect(media.schema, `${where} ${status} ${type}`).toBeDefined();
      }
    }
  });
});

describe("the dashboard API description is generated from the registered routes", () => {
  /** The Functions app as Azure's worker loads it (registrations happen on import). */
  async function loadApp() {
    Object.assign(process.env, {
      AzureWebJobsStorage: "UseDevelopmentStorage=true",
      AUTH_TENANT_ID: "00000000-0000-4000-8000-000000000000",
      AUTH_CLIENT_ID: "00000000-0000-4000-8000-000000000001",
      TASKHUB_NAME: "blastplane",
    });
    // @azure/functions outside a worker says so for each registration; the registry still records them.
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    await import("../../functions/index.js");
    warn.mockRestore();
    const { registeredRoutes } = await import("../../functions/composition/http-route.js");
    const { buildDashboardOpenApi } = await import("../../shared/dashboard/openapi.js");
    return { routes: registeredRoutes(), document: buildDashboardOpenApi(registeredRoutes()) };
  }

  it("equals the committed copy (test/fixtures/dashboard-openapi.json), which the linters check", async () => {
    const { document } = await loadApp();
    expect(document).toEqual(load(DESCRIPTIONS["dashboard API"]));
  }, 60_000);

  it("describes every route under /api except the description and its UI", async () => {
    const { routes } = await loadApp();
    const undescribed = routes.filter((r) => !r.openapi).map((r) => r.name);
    // The two §4 projections answer only a typed 501 (decision 0021): nothing to describe.
    expect(undescribed.sort()).toEqual(
      ["dashboardOpenApi", "dashboardDocs", "dashboardDocsAsset", "forecastLearning", "dynamicAssurance"].sort(),
    );
    const described = operations(load(DESCRIPTIONS["dashboard API"])).map(({ op }) => op.operationId);
    expect(described.sort()).toEqual(
      routes
        .filter((r) => r.openapi)
        .map((r) => r.name)
        .sort(),
    );
  }, 60_000);

  it("B-255 dashboard routes sit under /api with no version segment", async () => {
    const { routes } = await loadApp();
    const host = JSON.parse(readFileSync("host.json", "utf8")) as { extensions: { http: { routePrefix: string } } };
    expect(host.extensions.http.routePrefix).toBe("api");
    expect(routes.length).toBeGreaterThan(50);
    const versioned = routes.filter((r) => /(^|\/)v\d+(\/|$)/i.test(r.route)).map((r) => r.route);
    expect(versioned).toEqual([]);
    const description = load(DESCRIPTIONS["dashboard API"]) as {
      servers: { url: string }[];
      paths: Record<string, unknown>;
    };
    expect(description.servers.map((server) => server.url)).toEqual(["/api"]);
    expect(Object.keys(description.paths).filter((p) => /\/v\d+(\/|$)/i.test(p))).toEqual([]);
  }, 60_000);

  it("PUT /workspace documents 412 for a stale If-Match and 428 for a missing one", () => {
    const put = load(DESCRIPTIONS["dashboard API"]).paths["/workspace"]?.put;
    expect(Object.keys(put?.responses ?? {})).toEqual(expect.arrayContaining(["412", "428"]));
    expect(put?.responses["200"]?.headers).toHaveProperty("ETag");
  });
});

describe("job API description details", () => {
  const ops = Object.fromEntries(operations(load(DESCRIPTIONS["job API"])).map(({ where, op }) => [where, op]));

  it("health and readiness are public (security: []); the others need the token", () => {
    expect(ops["GET /v1/health"]?.security).toEqual([]);
    expect(ops["GET /v1/ready"]?.security).toEqual([]);
    expect(ops["GET /v1/jobs"]?.security).toEqual([{ ApiToken: [] }]);
  });

  it("declares the download media types and the ETag, Retry-After and Idempotent-Replayed headers", () => {
    expect(Object.keys(ops["GET /v1/jobs/{job_id}/results"]?.responses["200"]?.content ?? {})).toEqual([
      "application/zip",
      "application/xml",
      "text/tab-separated-values",
    ]);
    expect(
      Object.keys(ops["GET /api/v1/facade/jobs/{job_id}/files/{file_id}"]?.responses["200"]?.content ?? {}),
    ).toEqual(["application/xml", "application/gzip"]);
    expect(ops["GET /v1/jobs/{job_id}/status"]?.responses["200"]?.headers).toHaveProperty("ETag");
    expect(ops["POST /v1/jobs"]?.responses["429"]?.headers).toHaveProperty("Retry-After");
    expect(ops["POST /v1/jobs"]?.responses["200"]?.headers).toHaveProperty("Idempotent-Replayed");
  });
});
