import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { slackSignature } from "../../shared/channels/platform-b/signature.js";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";
import { postedArgs, startPlatformBFake } from "../support/notify-vendors.js";

/**
 * The Slack routes on the local stack (the Functions host, real Azurite): one signed `/svc status`
 * slash command end to end, and the transport's refusals (401, 413, 400, the envelope).
 */

const SECRET = "local-signing-secret-0123456789";
const TOKEN = "xoxb-local-token";
const READER = "44444444-4444-4444-4444-444444444444";

let stack: TestStack;
let slackApi: Awaited<ReturnType<typeof startPlatformBFake>>;

beforeAll(async () => {
  slackApi = await startPlatformBFake(TOKEN);
  stack = await startStack({
    env: {
      SLACK_TEST_SIGNING_SECRET: SECRET,
      SLACK_TEST_BOT_TOKEN: TOKEN,
      SVC_PLATFORM_B_CHANNEL_ENABLED: "true",
      SVC_PLATFORM_B_SIGNING_SECRET_REF: "env:SLACK_TEST_SIGNING_SECRET",
      SVC_PLATFORM_B_BOT_TOKEN_REF: "env:SLACK_TEST_BOT_TOKEN",
      SVC_PLATFORM_B_API_URL: `${slackApi.url}/api/`,
      // The bot token is shared with the outbound channel, which then needs its alert channel too.
      SVC_PLATFORM_B_ALERT_CHANNEL: "C0ALERTS",
      SVC_PLATFORM_B_PRINCIPAL_BINDINGS_JSON: JSON.stringify({ UREADER: READER }),
      SVC_CHANNEL_PRINCIPAL_ROLES_JSON: JSON.stringify({ [READER]: { name: "Rita", roles: ["Reader"] } }),
    },
  });
});
afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
  await slackApi?.close();
});

function post(path: string, body: string, contentType: string, headers: Record<string, string> = {}) {
  return fetch(`${stack.info.functions_url}/api/${path}`, {
    method: "POST",
    headers: { "content-type": contentType, ...headers },
    body,
  });
}

function signedHeaders(body: string) {
  const ts = String(Math.floor(Date.now() / 1000));
  return { "x-slack-request-timestamp": ts, "x-slack-signature": slackSignature(SECRET, ts, body) };
}

describe("Slack routes on the local stack", () => {
  it("C-003 C-415 C-416 a signed /svc status slash command is answered in the channel through the Web API", async () => {
    const body = new URLSearchParams({
      team_id: "T0TEAM",
      channel_id: "C0OPS",
      user_id: "UREADER",
      command: "/svc",
      text: "status",
      trigger_id: "1.2.abcdef",
      response_url: "https://hooks.slack.com/commands/x",
    }).toString();
    const from = slackApi.requests.length;
    const res = await post("channels/slack/commands", body, "application/x-www-form-urlencoded", signedHeaders(body));
    expect(res.status).toBe(200);
    const posts = slackApi.requests.slice(from).map(postedArgs);
    expect(posts).toHaveLength(1);
    expect(posts[0]?.channel).toBe("C0OPS");
    expect(JSON.stringify(posts[0]?.blocks)).toContain("Kill switch: off");
  });

  it("C-379 an unsigned or altered request is 401 in the error envelope; a 1 MB body 413; deep nesting 400", async () => {
    const event = JSON.stringify({ type: "url_verification", challenge: "abc" });
    const unsigned = await post("channels/slack/events", event, "application/json");
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ detail: expect.any(String), request_id: expect.any(String) });
    const altered = await post(
      "channels/slack/events",
      event.replace("abc", "abd"),
      "application/json",
      signedHeaders(event),
    );
    expect(altered.status).toBe(401);
    const handshake = await post("channels/slack/events", event, "application/json", signedHeaders(event));
    expect(await handshake.json()).toEqual({ challenge: "abc" });
    const big = JSON.stringify({ type: "event_callback", padding: "x".repeat(1024 * 1024) });
    expect((await post("channels/slack/events", big, "application/json", signedHeaders(big))).status).toBe(413);
    const deep = `{"type":"event_callback","x":${"[".repeat(3000)}${"]".repeat(3000)}}`;
    expect((await post("channels/slack/events", deep, "application/json", signedHeaders(deep))).status).toBe(400);
  });

  it("pairing approval needs an Approver's token", async () => {
    const body = JSON.stringify({ channel: "platform_b", sender_id: "U9", code: "ABCDEFGH", principal_oid: READER });
    expect((await post("channels/pairing", body, "application/json")).status).toBe(401);
    const reader = await mintToken(stack, "Reader");
    expect(
      (await post("channels/pairing", body, "application/json", { authorization: `Bearer ${reader}` })).status,
    ).toBe(403);
  });
});
