import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";

const ROOT = path.resolve(import.meta.dirname, "../..");
const work = mkdtempSync(path.join(tmpdir(), "bp-package-"));

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

/** Imports the app as the Functions worker does, from `app` as the working folder; resolves to what it printed or rejects with its error. */
function importApp(app: string, env: Record<string, string> = {}) {
  return promisify(execFile)(
    process.execPath,
    [path.join(ROOT, "scripts/import-probe.mjs"), "--functions", path.join(app, "dist/functions/index.js")],
    {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? "",
        AzureWebJobsStorage: "UseDevelopmentStorage=true",
        AUTH_TENANT_ID: "t",
        AUTH_CLIENT_ID: "c",
        ...env,
      },
    },
  );
}

/** The built Functions package alone (dist/functions and package.json), as deployed: no repository `config/` beside it. */
function deployedCopy(name: string): string {
  const app = path.join(work, name);
  cpSync(path.join(ROOT, "dist/functions"), path.join(app, "dist/functions"), { recursive: true });
  cpSync(path.join(ROOT, "package.json"), path.join(app, "package.json"));
  return app;
}

describe("the Functions package carries its catalogs", () => {
  it("the build puts the validated rule and action-type catalogs inside dist/functions, identical to config/", () => {
    for (const file of ["ops-rules.json", "action-types.json"]) {
      expect(readFileSync(path.join(ROOT, "dist/functions/config", file), "utf8")).toBe(
        readFileSync(path.join(ROOT, "config", file), "utf8"),
      );
    }
  });

  it("the built app starts with no repository config/ in its working folder", async () => {
    const app = deployedCopy("plain");
    expect(existsSync(path.join(app, "config"))).toBe(false);
    const { stdout } = await importApp(app);
    const { registered } = JSON.parse(stdout) as { registered: number };
    expect(registered).toBeGreaterThan(20);
  });

  it("SVC_CATALOG_DIR still overrides the shipped catalogs: a bad one there stops start-up naming its file and line", async () => {
    const app = deployedCopy("override");
    const dir = path.join(work, "operator-catalogs");
    cpSync(path.join(ROOT, "config"), dir, { recursive: true });
    const rules = path.join(dir, "ops-rules.json");
    const text = readFileSync(rules, "utf8").replace('"severity": "critical"', '"severity": "apocalyptic"');
    expect(text).toContain("apocalyptic");
    writeFileSync(rules, text);
    const line = text.split("\n").findIndex((l) => l.includes("apocalyptic")) + 1;
    await expect(importApp(app, { SVC_CATALOG_DIR: dir })).rejects.toMatchObject({
      stderr: expect.stringContaining(`${rules}:${line}:`),
    });
  });

  it("ships each JSON catalog with its build-time validation, and catalogs changed after the build are validated at start", async () => {
    const app = deployedCopy("changed-json");
    const config = path.join(app, "dist/functions/config");
    for (const file of [
      "action-types.json",
      "ops-rules.json",
      "health-metrics.json",
      "configuration-baseline.json",
      "browser-evidence-policies.json",
    ]) {
      const shipped = JSON.parse(readFileSync(path.join(config, `${file}.validated.json`), "utf8")) as {
        value: unknown;
      };
      expect(shipped.value, file).toMatchObject(JSON.parse(readFileSync(path.join(ROOT, "config", file), "utf8")));
    }
    // retry_job taken out of the action types in place: the rule catalog that proposes it, shipped
    // validated against the build's action types, is validated again at start and refused.
    const actionTypes = path.join(config, "action-types.json");
    const catalog = JSON.parse(readFileSync(actionTypes, "utf8")) as { action_types: { id: string }[] };
    catalog.action_types = catalog.action_types.filter((a) => a.id !== "retry_job");
    writeFileSync(actionTypes, JSON.stringify(catalog, null, 2));
    const rules = path.join(config, "ops-rules.json");
    const line =
      readFileSync(rules, "utf8")
        .split("\n")
        .findIndex((l) => l.includes('"retry_job"')) + 1;
    await expect(importApp(app)).rejects.toMatchObject({
      stderr: expect.stringContaining(`${rules}:${line}: rules.0.proposed_action: unknown action type retry_job`),
    });
  });

  it("ships each YAML file with its build-time parse, and a file changed after the build is parsed and validated at start", async () => {
    const app = deployedCopy("changed-yaml");
    const config = path.join(app, "dist/functions/config");
    for (const file of ["notifications-matrix.yaml", "approval-load.yaml"]) {
      const parsed = JSON.parse(readFileSync(path.join(config, `${file}.parsed.json`), "utf8")) as { value: unknown };
      expect(parsed.value, file).toEqual(parseYaml(readFileSync(path.join(ROOT, "config", file), "utf8")));
    }
    // The matrix changed in place, its build-time parse left as it was: start-up sees the change and refuses it.
    const matrix = path.join(config, "notifications-matrix.yaml");
    const text = readFileSync(matrix, "utf8").replace("categories: [A2, A4]", "categories: [A2, A9]");
    expect(text).toContain("A9");
    writeFileSync(matrix, text);
    const line = text.split("\n").findIndex((l) => l.includes("A9")) + 1;
    await expect(importApp(app)).rejects.toMatchObject({ stderr: expect.stringContaining(`${matrix}:${line}:`) });
  });
});
