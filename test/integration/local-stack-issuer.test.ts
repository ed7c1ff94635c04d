import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";

const stacks: TestStack[] = [];
let holder: Server | undefined;

afterAll(async () => {
  holder?.close();
  for (const stack of stacks) await stack.stop();
  stacks[0]?.cleanup();
});

const me = (stack: TestStack, token: string) =>
  fetch(`${stack.info.functions_url}/api/me`, { headers: { Authorization: `Bearer ${token}` } });

describe("local stack: the identity provider's issuer is stable across restarts", () => {
  it("accepts a token minted before a restart on the same data folder, although the provider now listens on another port", async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), "bp-issuer-"));
    const env = { IDP_PORT: "0", BLASTPLANE_SKIP_DEMO_DB: "1" };
    const first = await startStack({ dataDir, inMemory: false, env });
    stacks.push(first);
    const token = await mintToken(first, "Reader", { name: "Before Restart" });
    expect((await me(first, token)).status).toBe(200);
    expect(await first.stop()).toBe(0);

    // Keep the old port taken, so the restarted provider surely listens elsewhere.
    holder = createServer();
    const oldPort = Number(new URL(first.info.idp_url).port);
    await new Promise<void>((resolve) => holder?.listen(oldPort, "127.0.0.1", resolve));

    const second = await startStack({ dataDir, inMemory: false, env });
    stacks.push(second);
    expect(second.info.idp_url).not.toBe(first.info.idp_url);
    const res = await me(second, token);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ caller: { name: "Before Restart", roles: ["Reader"] } });
  }, 120_000);
});
