import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { loadLocalStackSettings } from "../../local/settings.js";
import { envFlag, envInt, envPort, envUrl, parseEnv } from "../../shared/config/env.js";
import { APP_SETTING_NAMES, DEFAULT_DB_UPDATE_CHECK_SCHEDULE, loadConfig } from "../../shared/config/load-config.js";
import { configRefusal } from "../support/helpers.js";
import { CONSOLE_SETTING_NAMES, loadConsoleConfig } from "../../shared/console/console-config.js";
import { NOTIFY_SETTING_NAMES } from "../../shared/notify/notify-config.js";
import { CHANNEL_SETTING_NAMES } from "../../shared/channels/channel-config.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const APP = { AzureWebJobsStorage: "UseDevelopmentStorage=true", AUTH_TENANT_ID: "tenant", AUTH_CLIENT_ID: "client" };
const refusal = configRefusal;

describe("parseEnv: one helper, one message format", () => {
  const schema = z.object({
    PORT: envPort().default(7071),
    COUNT: envInt(1, 10).default(3),
    SOURCE_URL: envUrl().optional(),
    ENABLED: envFlag().default(false),
    SECRET: z.string(),
  });
  const load = (env: Record<string, string | undefined>) =>
    parseEnv(schema, env, (v) => ({ ...v, nested: { port: v.PORT } }));

  it("applies defaults, converts types and freezes the result deeply", () => {
    const config = load({ SECRET: "s", ENABLED: "true" });
    expect(config).toEqual({
      PORT: 7071,
      COUNT: 3,
      SOURCE_URL: undefined,
      ENABLED: true,
      SECRET: "s",
      nested: { port: 7071 },
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.nested)).toBe(true);
  });

  it("reads an empty variable as unset, so NAME= means the default", () => {
    const config = load({ SECRET: "s", PORT: "", COUNT: "", SOURCE_URL: "" });
    expect(config).toMatchObject({ PORT: 7071, COUNT: 3 });
    expect(config.SOURCE_URL).toBeUndefined();
  });

  it("names every bad setting in one message: `invalid configuration: NAME: problem; …`", () => {
    const error = refusal(() =>
      load({ PORT: "70000", COUNT: "2.5", SOURCE_URL: "ftp://example.com/x", ENABLED: "yes" }),
    );
    expect(error.problems).toEqual([
      "PORT: must be a whole number from 0 to 65535",
      "COUNT: must be a whole number from 1 to 10",
      "SOURCE_URL: must be an absolute http(s) URL",
      "ENABLED: must be 0, 1, true or false",
      "SECRET: is required",
    ]);
    expect(error.message).toBe(`invalid configuration: ${error.problems.join("; ")}`);
    expect(error.name).toBe("ConfigError");
  });

  it("never repeats a refused value (settings such as connection strings carry secrets)", () => {
    const error = refusal(() => load({ SECRET: "s", PORT: "AccountKey=c2VjcmV0" }));
    expect(error.message).not.toContain("c2VjcmV0");
  });
});

describe("the three deployables use it", () => {
  it("the Functions app: required settings, ranges and URLs refused in the shared format", () => {
    expect(refusal(() => loadConfig({})).message).toBe(
      "invalid configuration: AzureWebJobsStorage: is required; AUTH_TENANT_ID: is required; AUTH_CLIENT_ID: is required",
    );
    const error = refusal(() =>
      loadConfig({
        ...APP,
        TASKHUB_NAME: "x",
        AUTH_CLOCK_SKEW_SECONDS: "601",
        JOBAPI_URL: "not a url",
        LOG_LEVEL: "loud",
      }),
    );
    expect(error.problems).toEqual([
      "TASKHUB_NAME: must be 3-45 letters or digits, starting with a letter",
      "AUTH_CLOCK_SKEW_SECONDS: must be a whole number from 0 to 600",
      "LOG_LEVEL: must be one of debug, info, warn, error",
      "JOBAPI_URL: must be an absolute http(s) URL",
    ]);
  });

  it("the Functions app: a frozen, typed configuration", () => {
    const config = loadConfig({ ...APP, JOBAPI_URL: "http://jobapi:8080//", AUTH_DISCOVERY_URL: "" });
    expect(config).toMatchObject({
      taskHubName: "blastplane",
      jobApiUrl: "http://jobapi:8080",
      auth: { discoveryUrl: undefined, clockSkewSeconds: 60 },
    });
    expect(Object.isFrozen(config.auth)).toBe(true);
  });

  it("the job API: same format", () => {
    const error = refusal(() => loadJobApiConfig({ JOBAPI_PORT: "http", JOBAPI_THREADS_PER_SHARD: "0" }, "/"));
    expect(error.message).toBe(
      "invalid configuration: JOBAPI_PORT: must be a whole number from 0 to 65535; JOBAPI_STORAGE_CONNECTION_STRING: is required; " +
        "JOBAPI_THREADS_PER_SHARD: must be auto or a whole number from 1 to 64",
    );
    expect(
      Object.isFrozen(loadJobApiConfig({ JOBAPI_STORAGE_CONNECTION_STRING: "UseDevelopmentStorage=true" }, "/")),
    ).toBe(true);
  });

  it("the local stack: same format; 0/1 flags also read true/false", () => {
    expect(refusal(() => loadLocalStackSettings({ IDP_PORT: "-1", BLASTPLANE_IN_MEMORY: "yes" }, "/")).message).toBe(
      "invalid configuration: BLASTPLANE_IN_MEMORY: must be 0, 1, true or false; IDP_PORT: must be a whole number from 0 to 65535",
    );
    const settings = loadLocalStackSettings(
      { BLASTPLANE_IN_MEMORY: "1", BLASTPLANE_SKIP_DEMO_DB: "true", JOBAPI_MAX_ACTIVE_JOBS: "3" },
      "/srv",
    );
    expect(settings).toMatchObject({
      inMemory: true,
      skipDemoDatabase: true,
      dataDir: "/srv/.data",
      jobApiEnv: { JOBAPI_MAX_ACTIVE_JOBS: "3" },
    });
  });
});

describe("SVC_DB_UPDATE_CHECK_SCHEDULE: one default, validated where it is read", () => {
  it("defaults to daily at 03:00 UTC and takes a valid NCRONTAB or TimeSpan as given", () => {
    expect(DEFAULT_DB_UPDATE_CHECK_SCHEDULE).toBe("0 0 3 * * *");
    expect(loadConfig(APP).dbUpdateCheckSchedule).toBe(DEFAULT_DB_UPDATE_CHECK_SCHEDULE);
    expect(loadConfig({ ...APP, SVC_DB_UPDATE_CHECK_SCHEDULE: "0 30 */6 * * MON-FRI" }).dbUpdateCheckSchedule).toBe(
      "0 30 */6 * * MON-FRI",
    );
    expect(loadConfig({ ...APP, SVC_DB_UPDATE_CHECK_SCHEDULE: "01:00:00" }).dbUpdateCheckSchedule).toBe("01:00:00");
  });

  it("refuses a schedule Azure could not run, at start-up, naming the setting and the field", () => {
    for (const [bad, problem] of [
      ["0 0 25 * * *", /hour field "25"/],
      ["0 3 * * *", /expected 6 fields/],
      ["%SVC_DB_UPDATE_CHECK_SCHEDULE%", /expected 6 fields/],
    ] as const) {
      const error = refusal(() => loadConfig({ ...APP, SVC_DB_UPDATE_CHECK_SCHEDULE: bad }));
      expect(error.problems).toHaveLength(1);
      expect(error.problems[0]).toMatch(/^SVC_DB_UPDATE_CHECK_SCHEDULE: /);
      expect(error.problems[0]).toMatch(problem);
    }
  });
});

describe("local.settings.sample.json", () => {
  const sample = JSON.parse(readFileSync(path.join(ROOT, "local.settings.sample.json"), "utf8")) as {
    Values: Record<string, string>;
  };

  it("lists every setting the Functions app reads, and only those (plus the worker runtime)", () => {
    expect(Object.keys(sample.Values).sort()).toEqual(
      [
        ...APP_SETTING_NAMES,
        ...CONSOLE_SETTING_NAMES,
        ...NOTIFY_SETTING_NAMES,
        ...CHANNEL_SETTING_NAMES,
        "FUNCTIONS_WORKER_RUNTIME",
      ].sort(),
    );
  });

  it("its console settings are a valid console configuration", () => {
    expect(loadConsoleConfig(sample.Values)).toMatchObject({
      approvalTtlSeconds: 86_400,
      breakGlass: { max_ttl_seconds: 14_400 },
      opsLoopSchedule: "0 */1 * * * *",
    });
  });

  it("is a valid configuration once its placeholders are filled in", () => {
    const values = Object.fromEntries(
      Object.entries(sample.Values).map(([name, value]) => [name, value.replace(/<[^>]+>/g, "placeholder")]),
    );
    expect(loadConfig(values)).toMatchObject({
      dbUpdateCheckSchedule: DEFAULT_DB_UPDATE_CHECK_SCHEDULE,
      taskHubName: "blastplane",
    });
  });
});
