import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { DEFAULT_DB_UPDATE_CHECK_SCHEDULE } from "../../shared/config/load-config.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const BUNDLE = path.join(ROOT, "dist/functions/index.js");
const APP = { AzureWebJobsStorage: "UseDevelopmentStorage=true", AUTH_TENANT_ID: "tenant", AUTH_CLIENT_ID: "client" };

interface Registered {
  name: string;
  bindings: Record<string, { type: string; schedule?: string }>;
}

/** Loads the built Functions app in a fresh process, as the worker does, and lists what it registered. */
async function register(env: Record<string, string>): Promise<Registered[]> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [path.join(ROOT, "scripts/import-probe.mjs"), "--functions", BUNDLE],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH, ...env },
    },
  );
  return (JSON.parse(stdout) as { functions: Registered[] }).functions;
}

const timerSchedule = (functions: Registered[]) =>
  Object.values(functions.find((f) => f.name === "databaseUpdateCheckTimer")?.bindings ?? {}).find(
    (b) => b.type === "timerTrigger",
  )?.schedule;

describe("the Functions app at start-up", () => {
  it("registers the update-check timer with the config's schedule: its default when the setting is unset", async () => {
    expect(timerSchedule(await register(APP))).toBe(DEFAULT_DB_UPDATE_CHECK_SCHEDULE);
  });

  it("registers the update-check timer with the configured schedule", async () => {
    expect(timerSchedule(await register({ ...APP, SVC_DB_UPDATE_CHECK_SCHEDULE: "0 15 */4 * * *" }))).toBe(
      "0 15 */4 * * *",
    );
  });

  it("refuses to load with a schedule Azure could not run, naming the setting", async () => {
    const failed = await register({ ...APP, SVC_DB_UPDATE_CHECK_SCHEDULE: "0 0 3 * *" }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failed?.code).not.toBe(0);
    expect(failed?.stderr).toContain(
      "invalid configuration: SVC_DB_UPDATE_CHECK_SCHEDULE: invalid NCRONTAB expression",
    );
  });
});
