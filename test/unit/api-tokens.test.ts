import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ApiTokenService, createFileSecretStore } from "../../shared/secrets/api-tokens.js";

const dirs: string[] = [];
function secretsDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "bp-tokens-"));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("job API token rotation", () => {
  it("B-201 B-202 two rotations at once both hand out a working token, and the first start's token stays valid through the grace", async () => {
    const dir = secretsDir();
    const tokens = new ApiTokenService(createFileSecretStore(dir));
    await tokens.ensure();
    const first = (await tokens.state())?.current.value as string;
    const [a, b] = await Promise.all([tokens.rotate(60), tokens.rotate(60)]);
    // Each caller shows its user a token; neither may be dead on arrival.
    expect(await tokens.isValid(a.current.value)).toBe(true);
    expect(await tokens.isValid(b.current.value)).toBe(true);
    expect(a.current.value).not.toBe(b.current.value);
    // The second chained on the first: what the first replaced is its grace token, not lost.
    expect(b.previous?.value).toBe(a.current.value);
    expect(a.previous?.value).toBe(first);
    // Another process (the job API) reading the stored state agrees.
    const reader = new ApiTokenService(createFileSecretStore(dir));
    expect(await reader.isValid(b.current.value)).toBe(true);
    expect(await reader.isValid(a.current.value)).toBe(true);
    expect(readdirSync(dir)).toEqual(["jobapi-api-token"]);
  });

  it("B-202 the token in use before a burst of rotations keeps its grace period, whatever the interleaving", async () => {
    const dir = secretsDir();
    const tokens = new ApiTokenService(createFileSecretStore(dir));
    await tokens.ensure();
    const inUse = (await tokens.state())?.current.value as string;
    const burst = await Promise.all(Array.from({ length: 5 }, () => tokens.rotate(60)));
    const reader = new ApiTokenService(createFileSecretStore(dir));
    expect(await reader.isValid(inUse)).toBe(true);
    for (const state of burst) expect(await reader.isValid(state.current.value)).toBe(true);
  });

  it("B-202 rotations in two processes at once keep the token in use and every token handed out valid", async () => {
    const dir = secretsDir();
    const first = new ApiTokenService(createFileSecretStore(dir), { cacheMs: 0 });
    await first.ensure();
    const inUse = (await first.state())?.current.value as string;
    const processes = Array.from({ length: 4 }, () => new ApiTokenService(createFileSecretStore(dir), { cacheMs: 0 }));
    const handedOut = await Promise.all(processes.flatMap((p) => [p.rotate(60), p.rotate(60)]));
    const reader = new ApiTokenService(createFileSecretStore(dir), { cacheMs: 0 });
    expect(await reader.isValid(inUse)).toBe(true);
    for (const state of handedOut) expect(await reader.isValid(state.current.value)).toBe(true);
  });

  it("B-202 B-201 with a last-write-wins store (Key Vault), rotations in two processes at once keep the token in use and both new tokens valid", async () => {
    // Key Vault keeps the last write and offers no compare-and-swap: no update() here.
    let stored: string | undefined;
    const tick = () => new Promise((r) => setImmediate(r));
    const lastWriteWins = {
      async get() {
        await tick();
        return stored;
      },
      async set(_name: string, value: string) {
        await tick();
        stored = value;
      },
    };
    const first = new ApiTokenService(lastWriteWins, { cacheMs: 0 });
    await first.ensure();
    const inUse = (await first.state())?.current.value as string;
    const [a, b] = await Promise.all([
      new ApiTokenService(lastWriteWins, { cacheMs: 0 }).rotate(60),
      new ApiTokenService(lastWriteWins, { cacheMs: 0 }).rotate(60),
    ]);
    const reader = new ApiTokenService(lastWriteWins, { cacheMs: 0 });
    expect(await reader.isValid(inUse)).toBe(true);
    expect(await reader.isValid(a.current.value)).toBe(true);
    expect(await reader.isValid(b.current.value)).toBe(true);
  });

  it("B-202 a predecessor stops working once its grace period has passed, also after later rotations", async () => {
    let now = new Date("2026-11-26T00:00:00Z");
    const tokens = new ApiTokenService(createFileSecretStore(secretsDir()), { cacheMs: 0, now: () => now });
    await tokens.ensure();
    const oldest = (await tokens.state())?.current.value as string;
    const middle = (await tokens.rotate(60)).current.value;
    now = new Date(now.getTime() + 30_000);
    const newest = (await tokens.rotate(60)).current.value;
    expect(await tokens.isValid(oldest)).toBe(true);
    now = new Date(now.getTime() + 31_000);
    expect(await tokens.isValid(oldest)).toBe(false);
    expect(await tokens.isValid(middle)).toBe(true);
    expect(await tokens.isValid(newest)).toBe(true);
    now = new Date(now.getTime() + 60_000);
    expect(await tokens.isValid(middle)).toBe(false);
    expect(await tokens.isValid(newest)).toBe(true);
  });

  it("concurrent writes of the file store each land whole, with no temporary file left behind", async () => {
    const dir = secretsDir();
    const store = createFileSecretStore(dir);
    const values = Array.from({ length: 20 }, (_, i) => `value-${i}-${"x".repeat(1000 * i)}`);
    await Promise.all(values.map((v) => store.set("some-secret", v)));
    expect(values).toContain(await store.get("some-secret"));
    expect(readdirSync(dir)).toEqual(["some-secret"]);
  });

  it("a rotation reads the stored token, not a cached copy another process has since replaced", async () => {
    const dir = secretsDir();
    const here = new ApiTokenService(createFileSecretStore(dir), { cacheMs: 60_000 });
    const elsewhere = new ApiTokenService(createFileSecretStore(dir), { cacheMs: 60_000 });
    await here.ensure();
    await here.state();
    const theirs = await elsewhere.rotate(60);
    const ours = await here.rotate(60);
    // The token the other instance handed out is the one this rotation keeps in its grace period.
    expect(ours.previous?.value).toBe(theirs.current.value);
  });
});
