import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire, SourceMap } from "node:module";
import path from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import { afterAll, describe, expect, it } from "vitest";
import { functionsBuildOptions } from "../../scripts/build-options.mjs";
import { LAZY_SDKS } from "../../shared/lazy-sdks.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DIST = path.join(ROOT, "dist/functions");

interface Metafile {
  outputs: Record<string, { inputs: Record<string, unknown>; imports: { path: string; kind: string }[] }>;
}
// Written by scripts/build.mjs (the tests' global setup runs it).
const meta = JSON.parse(readFileSync(path.join(ROOT, "dist/meta/functions.json"), "utf8")) as Metafile;

/** The outputs the worker reads when it imports the app: the entry and what it imports statically. */
function eagerOutputs(): string[] {
  const seen = new Set<string>();
  const visit = (output: string) => {
    if (seen.has(output)) return;
    seen.add(output);
    for (const imported of meta.outputs[output]?.imports ?? [])
      if (imported.kind === "import-statement") visit(imported.path);
  };
  visit("dist/functions/index.js");
  return [...seen];
}

const APP_ENV = {
  PATH: process.env.PATH,
  AzureWebJobsStorage: "UseDevelopmentStorage=true",
  AUTH_TENANT_ID: "t",
  AUTH_CLIENT_ID: "c",
};

/** Imports the built app in a fresh process, as the worker does: what it registered and every file it loaded. */
async function importBuiltApp(): Promise<{ loaded: string[]; registered: number }> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [path.join(ROOT, "scripts/import-probe.mjs"), "--loaded", path.join(DIST, "index.js")],
    { cwd: ROOT, env: APP_ENV },
  );
  return JSON.parse(stdout) as { loaded: string[]; registered: number };
}

const packagesOf = (outputs: string[]) =>
  new Set(
    outputs.flatMap((output) =>
      Object.keys(meta.outputs[output]?.inputs ?? {}).map(
        (input) => /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(input)?.[1] ?? input,
      ),
    ),
  );

/** Position (0-based line and column) of the first occurrence of `text` in `file`. */
function positionOf(file: string, text: string): { line: number; column: number } {
  const lines = readFileSync(file, "utf8").split("\n");
  const line = lines.findIndex((l) => l.includes(text));
  expect(line, `${text} in ${file}`).toBeGreaterThanOrEqual(0);
  return { line, column: lines[line]?.indexOf(text) ?? -1 };
}

function originalSourceAt(file: string, text: string): string | undefined {
  const map = new SourceMap(JSON.parse(readFileSync(`${file}.map`, "utf8")));
  const { line, column } = positionOf(file, text);
  const entry = map.findEntry(line, column);
  return "originalSource" in entry ? entry.originalSource : undefined;
}

/**
 * Packages that no first request of most routes needs (decision 0016): importing the app must not
 * evaluate any of them. Each is loaded on first use (shared/lazy-sdks.ts, the console's parts, the
 * cluster's and the channels' composition).
 */
const LOADED_ON_FIRST_USE = [
  "nodemailer",
  "@slack/web-api",
  "standardwebhooks",
  "@microsoft/agents-hosting",
  "@octokit/rest",
  "openai",
  "@kubernetes/client-node",
  "@azure/communication-sms",
  "@azure/identity",
  "@azure/msal-node",
  "@azure/keyvault-secrets",
  "@azure/storage-blob",
  "@azure/monitor-query-logs",
  "@azure/monitor-query-metrics",
  "@azure/arm-authorization",
  "@azure/arm-containerregistry",
  "@azure/arm-containerservice",
  "@azure/arm-resourcegraph",
  "@azure/arm-resourcehealth",
  "@azure/arm-resources",
  "@azure/arm-resources-subscriptions",
  "@azure/arm-resourcesdeployments",
  "@azure/arm-storage",
  "playwright-core",
];

const scratch: string[] = [];
afterAll(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

describe("the Functions bundle, built for cold starts", () => {
  it("evaluates none of the packages loaded on first use when the worker imports the app", async () => {
    const { loaded, registered } = await importBuiltApp();
    expect(registered).toBeGreaterThan(20);
    // What the process evaluated (the module hook saw the entry), not what the build planned.
    const outputs = loaded.filter((file) => file.startsWith(DIST)).map((file) => path.relative(ROOT, file));
    expect(outputs).toContain("dist/functions/index.js");
    const evaluated = packagesOf(outputs.filter((output) => meta.outputs[output]));
    expect(evaluated.has("@azure/functions")).toBe(true);
    expect(LOADED_ON_FIRST_USE.filter((pkg) => evaluated.has(pkg))).toEqual([]);
    // Nor from node_modules (an external).
    expect(loaded.filter((file) => LOADED_ON_FIRST_USE.some((pkg) => file.includes(`/node_modules/${pkg}/`)))).toEqual(
      [],
    );
    // Every SDK of shared/lazy-sdks.ts is one of them.
    expect(LOADED_ON_FIRST_USE).toEqual(expect.arrayContaining(Object.keys(LAZY_SDKS)));
  });

  it("loads each SDK of shared/lazy-sdks.ts from a bundle built like the app's, and it works", async () => {
    // The app's build options (splitting, banner, plugins) over the loaders alone, beside dist/functions.
    const out = mkdtempSync(path.join(ROOT, "dist/lazy-sdks-"));
    scratch.push(out);
    await build({ ...functionsBuildOptions, entryPoints: ["shared/lazy-sdks.ts"], outdir: out, metafile: false });
    const script = `
      const { LAZY_SDKS } = await import(${JSON.stringify(path.join(out, "lazy-sdks.js"))});
      const nodemailer = await LAZY_SDKS.nodemailer();
      const info = await nodemailer.createTransport({ jsonTransport: true }).sendMail({ from: "a@example.org", to: "b@example.org", subject: "s", text: "t" });
      const slack = await LAZY_SDKS["@slack/web-api"]();
      const client = new slack.WebClient("xoxb-test", { slackApiUrl: "http://127.0.0.1:9/api/" });
      const { Webhook } = await LAZY_SDKS.standardwebhooks();
      const hook = new Webhook("whsec_" + Buffer.from("0123456789abcdef0123456789abcdef").toString("base64"));
      const now = new Date();
      const headers = { "webhook-id": "msg_1", "webhook-timestamp": String(Math.floor(now / 1000)), "webhook-signature": hook.sign("msg_1", now, '{"a":1}') };
      const { CloudAdapter } = await LAZY_SDKS["@microsoft/agents-hosting"]();
      const { Octokit } = await LAZY_SDKS["@octokit/rest"]();
      console.log(JSON.stringify({
        loaded: Object.keys(LAZY_SDKS),
        email: JSON.parse(info.message).subject,
        slack: typeof client.chat.postMessage,
        webhook: hook.verify('{"a":1}', headers),
        teams: typeof new CloudAdapter({ clientId: "00000000-0000-0000-0000-000000000001", clientSecret: "x", tenantId: "00000000-0000-0000-0000-000000000002" }).continueConversation,
        git: typeof new Octokit({ baseUrl: "http://127.0.0.1:9" }).rest.pulls.create,
      }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      cwd: out,
      env: { PATH: process.env.PATH },
    });
    expect(JSON.parse(stdout)).toEqual({
      loaded: Object.keys(LAZY_SDKS),
      email: "s",
      slack: "function",
      webhook: { a: 1 },
      teams: "function",
      git: "function",
    });
  });

  it("imports no SDK that only some routes need: Key Vault, identity, Blob load on first use", () => {
    const eager = packagesOf(eagerOutputs());
    for (const lazy of [
      "@azure/keyvault-secrets",
      "@azure/identity",
      "@azure/msal-node",
      "@azure/storage-blob",
      "apache-arrow",
      // The Teams SDK: loaded on the first Teams reply or notification (POST /api/messages is registered eagerly).
      "@microsoft/agents-hosting",
    ]) {
      expect(eager.has(lazy), lazy).toBe(false);
    }
    // They are still shipped, in chunks of their own.
    const all = packagesOf(Object.keys(meta.outputs));
    for (const lazy of [
      "@azure/keyvault-secrets",
      "@azure/identity",
      "@azure/storage-blob",
      "@microsoft/agents-hosting",
    ])
      expect(all.has(lazy), lazy).toBe(true);
    // What registrations need is there.
    for (const needed of ["@azure/functions", "durable-functions", "zod", "@azure/data-tables"])
      expect(eager.has(needed), needed).toBe(true);
  });

  it("hands over the exports each package imported on first use is called through, in a bundle built like the app's", async () => {
    // Every `await import("<package>")` of the app's sources and the exports taken from it
    // (named; `@azure/arm-authorization` also from `default`, which role-assignments.ts reads).
    const used: Record<string, string[]> = {
      "@kubernetes/client-node": ["KubeConfig", "CoreV1Api", "VersionApi"],
      "@azure/arm-containerservice": ["ContainerServiceClient"],
      "@azure/arm-containerregistry": ["ContainerRegistryManagementClient"],
      "@azure/arm-resources": ["ResourceManagementClient"],
      "@azure/arm-resources-subscriptions": ["SubscriptionClient"],
      "@azure/arm-storage": ["StorageManagementClient"],
      "@azure/arm-authorization": ["AuthorizationManagementClient"],
      "@azure/core-client": ["ServiceClient"],
      "@azure/core-rest-pipeline": ["createPipelineFromOptions", "createDefaultHttpClient", "createPipelineRequest"],
      "@azure/identity": ["getBearerTokenProvider", "ClientSecretCredential"],
      "@azure/monitor-query-logs": ["LogsQueryResultStatus"],
    };
    // The sources still import exactly these packages on first use (a new one is added here).
    const sources = execFileSync(
      "git",
      ["grep", "-h", "-o", "-E", 'await import\\("[@a-z][^"]*"\\)', "--", "shared", "functions"],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
    const imported = new Set([...sources.matchAll(/import\("([^"]+)"\)/g)].map((m) => m[1] as string));
    imported.delete("playwright-core"); // external: loaded from node_modules, not the bundle
    for (const loader of Object.keys(LAZY_SDKS)) imported.delete(loader); // the test above
    expect([...imported].sort()).toEqual(Object.keys(used).sort());
    const out = mkdtempSync(path.join(ROOT, "dist/lazy-imports-"));
    scratch.push(out);
    const entry = path.join(out, "entry.ts");
    writeFileSync(
      entry,
      `export const loaders = {${Object.keys(used)
        .map((pkg) => `${JSON.stringify(pkg)}: () => import(${JSON.stringify(pkg)})`)
        .join(",\n")}};\n`,
    );
    await build({ ...functionsBuildOptions, entryPoints: [entry], outdir: path.join(out, "dist"), metafile: false });
    const script = `
      const { loaders } = await import(${JSON.stringify(path.join(out, "dist/entry.js"))});
      const found = {};
      for (const [pkg, load] of Object.entries(loaders)) {
        const m = await load();
        found[pkg] = { named: Object.keys(m).filter((k) => m[k] !== undefined), fromDefault: Object.keys(m.default ?? {}) };
      }
      console.log(JSON.stringify(found));`;
    const { stdout } = await promisify(execFile)(process.execPath, ["--input-type=module", "-e", script], {
      cwd: out,
      env: { PATH: process.env.PATH },
    });
    const found = JSON.parse(stdout) as Record<string, { named: string[]; fromDefault: string[] }>;
    for (const [pkg, names] of Object.entries(used)) {
      const available =
        pkg === "@azure/arm-authorization" ? [...found[pkg]!.named, ...found[pkg]!.fromDefault] : found[pkg]!.named;
      expect(available, pkg).toEqual(expect.arrayContaining(names));
    }
  });

  it("parses durable-functions' client-only dependencies only when a durable client first calls out", async () => {
    const eager = packagesOf(eagerOutputs());
    for (const lazy of ["axios", "validator", "moment", "mime-db", "@opentelemetry/api", "lodash"])
      expect(eager.has(lazy), lazy).toBe(false);
    expect(
      readdirSync(path.join(DIST, "lazy"))
        .filter((f) => f.endsWith(".cjs"))
        .sort(),
    ).toEqual(["axios.cjs", "lodash-cloneDeep.cjs", "moment.cjs", "opentelemetry-api.cjs", "validator.cjs"]);
    // A fresh process importing the app (as the worker does) loads none of them.
    const { loaded, registered } = await importBuiltApp();
    expect(registered).toBeGreaterThan(20);
    expect(loaded.filter((file) => file.includes(`${path.sep}lazy${path.sep}`))).toEqual([]);
  });

  it("ships those dependencies whole: each lazy module loads on its own and works", () => {
    const load = createRequire(path.join(DIST, "index.js"));
    const axios = load("./lazy/axios.cjs") as { default: { create: unknown } };
    expect(typeof axios.default.create).toBe("function");
    const validator = load("./lazy/validator.cjs") as { isURL: (url: string, options?: object) => boolean };
    expect(validator.isURL("http://127.0.0.1:7071/runtime/webhooks/durabletask", { require_tld: false })).toBe(true);
    const moment = load("./lazy/moment.cjs") as (input: string) => {
      add: (n: number, unit: string) => { toISOString: () => string };
    };
    expect(moment("2026-01-01T00:00:00Z").add(90, "s").toISOString()).toBe("2026-01-01T00:01:30.000Z");
    const otel = load("./lazy/opentelemetry-api.cjs") as { trace: { getTracer: unknown } };
    expect(typeof otel.trace.getTracer).toBe("function");
    const cloneDeep = load("./lazy/lodash-cloneDeep.cjs") as <T>(value: T) => T;
    const original = { urls: { statusQueryGetUri: "http://127.0.0.1/x" } };
    const copy = cloneDeep(original);
    expect(copy).toEqual(original);
    expect(copy.urls).not.toBe(original.urls);
  });

  it("carries English zod messages only (no other locale)", () => {
    const zodLocales = Object.values(meta.outputs).flatMap((output) =>
      Object.keys(output.inputs).filter(
        (input) => input.includes("zod/v4/locales/") && !input.startsWith("zod-english-only:"),
      ),
    );
    expect(zodLocales.map((input) => path.basename(input))).toEqual(["en.js"]);
  });

  it("keeps the domain errors' class names, which their `name` (and so the logs) comes from", () => {
    const classes = ["shared/errors.ts", "shared/config/env.ts"].flatMap((file) =>
      [...readFileSync(path.join(ROOT, file), "utf8").matchAll(/export (?:abstract )?class (\w+)/g)].map(
        (m) => m[1] as string,
      ),
    );
    expect(classes).toContain("NotFoundError");
    const bundle = eagerOutputs()
      .map((output) => readFileSync(path.join(ROOT, output), "utf8"))
      .join("\n");
    // Classes no trigger uses are dropped from the bundle; every one it holds keeps its name.
    const bundled = classes.filter((name) =>
      new RegExp(`(?<![\\w$])${name}\\d*=class|class ${name}\\d*[ {]`).test(bundle),
    );
    expect(bundled).toEqual(
      expect.arrayContaining(["DomainError", "NotFoundError", "ConflictError", "QueueFullError", "ConfigError"]),
    );
    for (const name of bundled) {
      // Declared under its own name (`X=class` or `class X`), never renamed apart (`X2=class`).
      expect(new RegExp(`(?<![\\w$])(?:${name}=class|class ${name}[ {])`).test(bundle), name).toBe(true);
      expect(new RegExp(`(?<![\\w$])${name}\\d+=class`).test(bundle), `${name} renamed`).toBe(false);
    }
  });

  it("keeps source maps usable: minified code maps back to its source file, in the entry, a chunk and a lazy module", () => {
    // A trigger's own text stays in the entry (shared modules move to chunks once a lazy chunk shares them).
    expect(originalSourceAt(path.join(DIST, "index.js"), "blastplane-functions")).toMatch(/functions\/health\.ts$/);
    const vaultChunk = Object.keys(meta.outputs).find((output) =>
      Object.keys(meta.outputs[output]?.inputs ?? {}).some((input) => input.includes("@azure/keyvault-secrets/")),
    );
    expect(originalSourceAt(path.join(ROOT, String(vaultChunk)), "keyvault-secrets")).toMatch(
      /node_modules\/@azure\/keyvault-secrets\//,
    );
    expect(originalSourceAt(path.join(DIST, "lazy/validator.cjs"), "isURL")).toMatch(/node_modules\/validator\//);
  });
});
