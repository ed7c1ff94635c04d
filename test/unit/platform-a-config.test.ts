import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/config/env.js";
import { loadChannelConfig } from "../../shared/channels/channel-config.js";
import { loadTeamsInboundConfig } from "../../shared/channels/platform-a/teams-config.js";
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

describe("chat platform A inbound settings (issue 26; spec §2.6, §7 item 8, §8)", () => {
  const base = {
    SVC_PLATFORM_A_CHANNEL_ENABLED: "true",
    SVC_PLATFORM_A_BOT_APP_ID: TEAMS.SVC_PLATFORM_A_BOT_APP_ID,
    SVC_PLATFORM_A_TENANT_ID: TEAMS.SVC_PLATFORM_A_TENANT_ID,
  };
  const binding = (i: number) =>
    [`aaaaaaaa-0000-4000-8000-${i.toString(16).padStart(12, "0")}`, "5a6b7c8d-0000-4000-8000-0000000000a1"] as const;
  const bindings = (n: number) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => binding(i))));
  const inboundProblems = (env: Record<string, string>) => {
    try {
      loadTeamsInboundConfig(env);
    } catch (error) {
      if (error instanceof ConfigError) return error.problems.join("\n");
      throw error;
    }
    return "";
  };

  it("C-254 the channel is off by default: nothing is required and the route stays closed", () => {
    expect(loadTeamsInboundConfig({})).toBeUndefined();
    expect(loadTeamsInboundConfig({ SVC_PLATFORM_A_CHANNEL_ENABLED: "false" })).toBeUndefined();
  });

  it("C-260 C-261 C-262 bindings: unset, {}, an array, a non-string value or 1,001 entries refuse to start; 1,000 load, compared like object ids", () => {
    expect(inboundProblems(base)).toMatch(/SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: is required/);
    expect(inboundProblems({ ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: "{}" })).toMatch(/must not be empty/);
    expect(inboundProblems({ ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: '["a"]' })).toMatch(
      /must be a JSON object/,
    );
    expect(
      inboundProblems({
        ...base,
        SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: JSON.stringify({ [binding(1)[0]]: 42 }),
      }),
    ).toMatch(/must be a principal object id GUID \(a string\)/);
    expect(inboundProblems({ ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: "{not json" })).toMatch(/not valid JSON/);
    expect(inboundProblems({ ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1001) })).toMatch(
      /holds 1001 entries; at most 1000/,
    );
    const [key, value] = binding(7);
    expect(
      inboundProblems({
        ...base,
        SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: JSON.stringify({ [key]: value, [`{${key.toUpperCase()}}`]: value }),
      }),
    ).toMatch(/is bound twice/);
    const config = loadTeamsInboundConfig({ ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1000) });
    expect(config?.bindings.size).toBe(1000);
  });

  it("C-259 an http:// issuer or key-set override refuses to start; the bot app id and tenant are required when enabled", () => {
    const ok = { ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1) };
    expect(inboundProblems({ ...ok, SVC_PLATFORM_A_OPENID_METADATA_URL: "http://127.0.0.1:1/openid" })).toMatch(
      /SVC_PLATFORM_A_OPENID_METADATA_URL.*https/,
    );
    expect(inboundProblems({ ...ok, SVC_PLATFORM_A_TOKEN_ISSUER: "http://api.botframework.com" })).toMatch(
      /SVC_PLATFORM_A_TOKEN_ISSUER.*https/,
    );
    const { SVC_PLATFORM_A_BOT_APP_ID: _a, SVC_PLATFORM_A_TENANT_ID: _t, ...noIdentity } = ok;
    expect(inboundProblems(noIdentity)).toMatch(/SVC_PLATFORM_A_BOT_APP_ID[\s\S]*SVC_PLATFORM_A_TENANT_ID/);
    expect(loadTeamsInboundConfig(ok)).toMatchObject({
      metadataUrl: "https://login.botframework.com/v1/.well-known/openidconfiguration",
      issuer: "https://api.botframework.com",
      guestTenantIds: [],
    });
  });

  it("C-394 C-395 C-396 SVC_PLATFORM_A_SENDER_ACCESS: allowlist by default (bindings required); pairing and disabled need no bindings but still check any given; another value refuses to start", () => {
    expect(loadTeamsInboundConfig({ ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1) })?.senderAccess).toBe(
      "allowlist",
    );
    expect(inboundProblems({ ...base, SVC_PLATFORM_A_SENDER_ACCESS: "allowlist" })).toMatch(
      /SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: is required/,
    );
    for (const mode of ["pairing", "disabled"]) {
      const config = loadTeamsInboundConfig({ ...base, SVC_PLATFORM_A_SENDER_ACCESS: mode });
      expect(config).toMatchObject({ senderAccess: mode });
      expect(config?.bindings.size).toBe(0);
      expect(
        inboundProblems({ ...base, SVC_PLATFORM_A_SENDER_ACCESS: mode, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: "{}" }),
      ).toMatch(/must not be empty/);
    }
    expect(inboundProblems({ ...base, SVC_PLATFORM_A_SENDER_ACCESS: "open" })).toMatch(/SVC_PLATFORM_A_SENDER_ACCESS/);
  });

  it("SVC_PLATFORM_A_AUTHORITY_HOST: unset keeps the Agents SDK's default; an HTTPS origin is taken (trailing slash dropped); http, a path or credentials refuse to start", () => {
    const ok = { ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1) };
    expect(loadTeamsInboundConfig(ok)?.authorityHost).toBeUndefined();
    expect(
      loadTeamsInboundConfig({ ...ok, SVC_PLATFORM_A_AUTHORITY_HOST: "https://login.microsoftonline.us/" })
        ?.authorityHost,
    ).toBe("https://login.microsoftonline.us");
    expect(
      loadTeamsInboundConfig({ ...ok, SVC_PLATFORM_A_AUTHORITY_HOST: "https://127.0.0.1:8443" })?.authorityHost,
    ).toBe("https://127.0.0.1:8443");
    for (const bad of ["http://127.0.0.1:8443", "https://login.microsoftonline.com/tenant", "https://u:p@host", "nope"])
      expect(inboundProblems({ ...ok, SVC_PLATFORM_A_AUTHORITY_HOST: bad })).toMatch(/SVC_PLATFORM_A_AUTHORITY_HOST/);
  });

  it("SVC_PLATFORM_A_LOCAL_ANONYMOUS, SVC_PLATFORM_A_OPENID_CA_FILE and SVC_PLATFORM_A_AUTHORITY_CA_FILE (the Agents Playground, the local issuer's certificate) refuse to start outside the local profile, whether the channel is on or off; locally they load", () => {
    const ok = {
      ...base,
      SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1),
      SVC_PLATFORM_A_CLIENT_SECRET_REF: "env:S",
    };
    const local = {
      SVC_PLATFORM_A_LOCAL_ANONYMOUS: "true",
      SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: "aaaaaaaa-1111-4111-8111-111111111111",
      SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT: "56151",
      SVC_PLATFORM_A_OPENID_CA_FILE: "/data/bot-service/issuer.crt",
      SVC_PLATFORM_A_AUTHORITY_CA_FILE: "/data/bot-service/issuer.crt",
    };
    const refused = (env: Record<string, string>) => {
      try {
        loadChannelConfig(env, { local: false });
      } catch (error) {
        if (error instanceof ConfigError) return error.problems.join("\n");
        throw error;
      }
      return "";
    };
    for (const env of [local, { ...ok, SVC_PLATFORM_A_CLIENT_SECRET_REF: "kv:s", ...local }]) {
      const problems = refused(env);
      expect(problems).toMatch(/SVC_PLATFORM_A_LOCAL_ANONYMOUS: token-less activities are for the local profile only/);
      expect(problems).toMatch(/SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: .* local profile only/);
      expect(problems).toMatch(/SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT: .* local profile only/);
      expect(problems).toMatch(/SVC_PLATFORM_A_OPENID_CA_FILE: .* local profile only/);
      expect(problems).toMatch(/SVC_PLATFORM_A_AUTHORITY_CA_FILE: .* local profile only/);
    }
    expect(refused({ SVC_PLATFORM_A_LOCAL_ANONYMOUS: "false" })).toBe("");
    expect(loadChannelConfig({ ...ok, ...local }, { local: true }).platformA?.inbound).toMatchObject({
      localAnonymous: true,
      localAnonymousUser: "aaaaaaaa-1111-4111-8111-111111111111",
      localAnonymousConnectorPort: 56151,
      openIdCaFile: "/data/bot-service/issuer.crt",
      authorityCaFile: "/data/bot-service/issuer.crt",
    });
    expect(loadChannelConfig(ok, { local: true }).platformA?.inbound.localAnonymous).toBe(false);
  });

  it("SVC_PLATFORM_A_LOCAL_ANONYMOUS acts as exactly one configured Teams user: without SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER (a GUID) it refuses to start; the connector port defaults to the Playground's 56150", () => {
    const ok = {
      ...base,
      SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1),
      SVC_PLATFORM_A_CLIENT_SECRET_REF: "env:S",
      SVC_PLATFORM_A_LOCAL_ANONYMOUS: "true",
    };
    const problems = (env: Record<string, string>) => {
      try {
        loadChannelConfig(env, { local: true });
      } catch (error) {
        if (error instanceof ConfigError) return error.problems.join("\n");
        throw error;
      }
      return "";
    };
    expect(problems(ok)).toMatch(/SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: .* is required/);
    expect(problems({ ...ok, SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: "29:local-user" })).toMatch(
      /SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER/,
    );
    expect(
      problems({ ...ok, SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: "X", SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT: "0" }),
    ).toMatch(/SVC_PLATFORM_A_LOCAL_ANONYMOUS_CONNECTOR_PORT/);
    const user = "{AAAAAAAA-1111-4111-8111-111111111111}";
    expect(
      loadChannelConfig({ ...ok, SVC_PLATFORM_A_LOCAL_ANONYMOUS_USER: user }, { local: true }).platformA?.inbound,
    ).toMatchObject({
      localAnonymous: true,
      localAnonymousUser: "aaaaaaaa-1111-4111-8111-111111111111",
      localAnonymousConnectorPort: 56150,
    });
  });

  it("C-254 the Functions app's channel settings read the Teams channel: its replies need the bot's client secret reference, env: only locally", () => {
    const ok = { ...base, SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON: bindings(1) };
    const channelProblems = (env: Record<string, string>, local: boolean) => {
      try {
        loadChannelConfig(env, { local });
      } catch (error) {
        if (error instanceof ConfigError) return error.problems.join("\n");
        throw error;
      }
      return "";
    };
    expect(loadChannelConfig({}, { local: false }).platformA).toBeUndefined();
    expect(channelProblems(ok, false)).toMatch(/SVC_PLATFORM_A_CLIENT_SECRET_REF: a secret reference/);
    expect(channelProblems({ ...ok, SVC_PLATFORM_A_CLIENT_SECRET_REF: "env:BOT_SECRET" }, false)).toMatch(
      /SVC_PLATFORM_A_CLIENT_SECRET_REF: env: references are for the local profile only/,
    );
    // Teams' and Slack's problems are reported together.
    expect(
      channelProblems({ SVC_PLATFORM_A_CHANNEL_ENABLED: "true", SVC_PLATFORM_B_CHANNEL_ENABLED: "true" }, true),
    ).toMatch(/SVC_PLATFORM_B_SIGNING_SECRET_REF[\s\S]*SVC_PLATFORM_A_BOT_APP_ID/);
    const config = loadChannelConfig(
      { ...ok, SVC_PLATFORM_A_CLIENT_SECRET_REF: "kv:teams-bot-secret" },
      { local: false },
    );
    expect(config.platformA).toMatchObject({
      clientSecretRef: "kv:teams-bot-secret",
      inbound: { botAppId: TEAMS.SVC_PLATFORM_A_BOT_APP_ID, tenantId: TEAMS.SVC_PLATFORM_A_TENANT_ID },
    });
  });
});
