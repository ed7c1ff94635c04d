import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/config/env.js";
import { loadNotifyConfig } from "../../shared/notify/notify-config.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const catalogDir = path.join(ROOT, "config");
const TEAMS = {
  SVC_PLATFORM_A_BOT_APP_ID: "0d1e2f3a-1111-4222-8333-944455566677",
  SVC_PLATFORM_A_TENANT_ID: "7c1d2f3a-4b5c-4d6e-8f90-a1b2c3d4e5f6",
  SVC_PLATFORM_A_CLIENT_SECRET_REF: "kv:teams-bot-secret",
};

const problemsOf = (env: Record<string, string>, local = false) => {
  try {
    loadNotifyConfig(env, { local, catalogDir });
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
};

describe("chat platform A outbound settings (issue 25; spec §2.6, §7 item 8)", () => {
  it("C-252 the Teams channel registers from its three settings (as an A2 channel of operational_alert in the shipped matrix)", () => {
    const config = loadNotifyConfig(
      { ...TEAMS, SVC_PLATFORM_A_ALERT_CONVERSATION_ID: "19:alerts@thread.tacv2" },
      { local: false, catalogDir },
    );
    expect([...config.registered]).toEqual(["teams"]);
    expect(config.platformA).toEqual({
      botAppId: TEAMS.SVC_PLATFORM_A_BOT_APP_ID,
      tenantId: TEAMS.SVC_PLATFORM_A_TENANT_ID,
      clientSecretRef: "kv:teams-bot-secret",
      serviceUrl: "https://smba.trafficmanager.net/teams/",
      alertConversationId: "19:alerts@thread.tacv2",
    });
  });

  it("C-498 a half-configured Teams channel, a non-GUID app id and a plain-HTTP service URL outside the local stack refuse to start", () => {
    expect(problemsOf({ SVC_PLATFORM_A_BOT_APP_ID: TEAMS.SVC_PLATFORM_A_BOT_APP_ID })).toEqual([
      "SVC_PLATFORM_A_TENANT_ID, SVC_PLATFORM_A_CLIENT_SECRET_REF: are required for the chat platform A channel",
    ]);
    expect(problemsOf({ ...TEAMS, SVC_PLATFORM_A_BOT_APP_ID: "my-bot" }).join("\n")).toMatch(
      /SVC_PLATFORM_A_BOT_APP_ID.*GUID/,
    );
    expect(problemsOf({ ...TEAMS, SVC_PLATFORM_A_SERVICE_URL: "http://127.0.0.1:3978/" })).toEqual([
      "SVC_PLATFORM_A_SERVICE_URL: must be https:// outside the local profile",
    ]);
    expect(problemsOf({ ...TEAMS, SVC_PLATFORM_A_SERVICE_URL: "http://127.0.0.1:3978/" }, true)).toEqual([]);
  });
});
