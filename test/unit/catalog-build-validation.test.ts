import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadBrowserEvidencePolicies } from "../../shared/console/providers/browser-evidence-policies.js";
import { loadHealthMetricSet } from "../../shared/console/providers/health-metrics.js";
import { loadActionTypes } from "../../shared/ops/actions/action-types.js";
import { VALIDATED_SUFFIX } from "../../shared/ops/catalog/json-catalog.js";
import { SHIPPED_JSON_CATALOGS, validateShippedCatalogs } from "../../shared/ops/catalog/shipped-catalogs.js";
import { loadRuleCatalog } from "../../shared/ops/rules/rule-catalog.js";
import { loadConfigurationBaseline } from "../../shared/ops/snapshots/configuration-baseline.js";

const CONFIG = path.resolve(import.meta.dirname, "../../config");
const work = mkdtempSync(path.join(tmpdir(), "bp-catalog-build-"));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A folder like the build's dist/functions/config: the shipped catalogs, each with its build validation beside it. */
function shippedFolder(name: string): string {
  const dir = path.join(work, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const file of readdirSync(CONFIG)) copyFileSync(path.join(CONFIG, file), path.join(dir, file));
  for (const [file, validated] of Object.entries(validateShippedCatalogs(dir)))
    writeFileSync(path.join(dir, `${file}${VALIDATED_SUFFIX}`), JSON.stringify(validated));
  return dir;
}

/** Rewrites the recorded value of a catalog's build validation, its digests left as they are. */
function markShippedValue(dir: string, file: string, mark: (value: Record<string, unknown>) => void) {
  const at = path.join(dir, `${file}${VALIDATED_SUFFIX}`);
  const shipped = JSON.parse(readFileSync(at, "utf8")) as { value: Record<string, unknown> };
  mark(shipped.value);
  writeFileSync(at, JSON.stringify(shipped));
}

describe("JSON catalogs validated at build time (decision 0016)", () => {
  it("the build validates every JSON catalog of config/, with the result its loader gives at start", () => {
    const shipped = validateShippedCatalogs(CONFIG);
    const jsonFiles = readdirSync(CONFIG).filter((f) => f.endsWith(".json"));
    expect(SHIPPED_JSON_CATALOGS.map((c) => c.file).sort()).toEqual(jsonFiles.sort());
    expect(Object.keys(shipped).sort()).toEqual(jsonFiles.sort());
    const actions = loadActionTypes(path.join(CONFIG, "action-types.json"));
    expect(shipped["action-types.json"]?.value).toEqual(actions);
    expect(shipped["ops-rules.json"]?.value).toEqual(loadRuleCatalog(actions, path.join(CONFIG, "ops-rules.json")));
    expect(shipped["health-metrics.json"]?.value).toEqual(
      loadHealthMetricSet(path.join(CONFIG, "health-metrics.json")),
    );
    const { digest: _digest, ...baseline } = loadConfigurationBaseline(
      path.join(CONFIG, "configuration-baseline.json"),
    );
    expect(shipped["configuration-baseline.json"]?.value).toEqual(baseline);
    expect(shipped["browser-evidence-policies.json"]?.value).toEqual(
      loadBrowserEvidencePolicies(path.join(CONFIG, "browser-evidence-policies.json")),
    );
  });

  it("start takes a shipped catalog's build validation while its text is the one the build validated", () => {
    const dir = shippedFolder("taken");
    markShippedValue(dir, "health-metrics.json", (value) => {
      value.window_minutes = 77;
    });
    expect(loadHealthMetricSet(path.join(dir, "health-metrics.json")).window_minutes).toBe(77);
  });

  it("a catalog changed after the build is validated at start and a bad value stops it naming file and line", () => {
    const dir = shippedFolder("changed");
    const file = path.join(dir, "health-metrics.json");
    const text = readFileSync(file, "utf8").replace(/"window_minutes": \d+/, '"window_minutes": 2');
    expect(text).toContain('"window_minutes": 2');
    writeFileSync(file, text);
    const line = text.split("\n").findIndex((l) => l.includes('"window_minutes": 2')) + 1;
    expect(() => loadHealthMetricSet(file)).toThrow(`${file}:${line}: window_minutes:`);
  });

  it("the rule catalog is validated at start against other action types than the build's, naming the rule's line", () => {
    const dir = shippedFolder("dependency");
    const actions = loadActionTypes(path.join(dir, "action-types.json"));
    const rules = path.join(dir, "ops-rules.json");
    // The shipped rule catalog holds for the shipped action types ...
    expect(loadRuleCatalog(actions, rules).rules.length).toBeGreaterThan(0);
    // ... not for a catalog without retry_job, which R-JOB-001 proposes.
    const fewer = { ...actions, action_types: actions.action_types.filter((a) => a.id !== "retry_job") };
    const line =
      readFileSync(rules, "utf8")
        .split("\n")
        .findIndex((l) => l.includes('"proposed_action": "retry_job"')) + 1;
    expect(() => loadRuleCatalog(fewer, rules)).toThrow(
      new RegExp(`ops-rules\\.json:${line}: rules\\.\\d+\\.proposed_action: unknown action type retry_job`),
    );
  });
});
