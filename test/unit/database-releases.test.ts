import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { holdRelease, pruneReleases, readCurrent, releaseHold, swapCurrent } from "../../shared/databases/releases.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const DAY = 24 * 3600 * 1000;
const NOW = new Date("2026-11-22T12:00:00Z");

function dbDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), "bp-releases-"));
  dirs.push(d);
  return d;
}

function release(dir: string, name: string, complete = true, ageMs = 0): void {
  mkdirSync(path.join(dir, name));
  if (complete) writeFileSync(path.join(dir, name, "manifest.json"), "{}");
  const t = new Date(NOW.getTime() - ageMs);
  utimesSync(path.join(dir, name), t, t);
}

function staging(dir: string, name: string, owner: object | undefined, ageMs = 0): void {
  mkdirSync(path.join(dir, name));
  if (owner) writeFileSync(path.join(dir, name, "owner.json"), JSON.stringify(owner));
  const t = new Date(NOW.getTime() - ageMs);
  utimesSync(path.join(dir, name), t, t);
}

/** The pid of a process that has already exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"], { encoding: "utf8" });
  return Number(child.stdout);
}

describe("database release folders", () => {
  it("swaps current atomically and reads it back", async () => {
    const d = dbDir();
    expect(await readCurrent(d)).toBeUndefined();
    await swapCurrent(d, "2026-01-01-00-00-00");
    await swapCurrent(d, "2026-02-01-00-00-00");
    expect(await readCurrent(d)).toBe("2026-02-01-00-00-00");
    expect(readdirSync(d)).toEqual(["current"]);
  });

  it("keeps current and the newest others, and frees old releases and abandoned builds only", async () => {
    const d = dbDir();
    for (const r of [
      "2026-01-01-00-00-00",
      "2026-02-01-00-00-00",
      "2026-03-01-00-00-00",
      "2026-04-01-00-00-00",
      "2026-05-01-00-00-00",
    ])
      release(d, r);
    await swapCurrent(d, "2026-03-01-00-00-00");
    release(d, "2026-06-01-00-00-00", false); // being built right now
    release(d, "2025-12-01-00-00-00", false, 3 * DAY); // a build that crashed days ago
    const me = { host: os.hostname(), pid: process.pid, started_at: NOW.toISOString() };
    staging(d, ".staging-live", { ...me, started_at: new Date(NOW.getTime() - 5 * DAY).toISOString() }); // a long build, still running
    staging(d, ".staging-unowned-new", undefined);
    staging(d, ".staging-crashed", { ...me, pid: deadPid() });
    staging(d, ".staging-elsewhere", {
      host: "other-host",
      pid: 1,
      started_at: new Date(NOW.getTime() - 3600_000).toISOString(),
    });
    staging(d, ".staging-elsewhere-old", {
      host: "other-host",
      pid: 1,
      started_at: new Date(NOW.getTime() - 3 * DAY).toISOString(),
    });
    staging(d, ".staging-unowned-old", undefined, 3 * DAY);
    writeFileSync(path.join(d, "current.tmp-stray"), "x");
    utimesSync(path.join(d, "current.tmp-stray"), new Date(NOW.getTime() - 3 * DAY), new Date(NOW.getTime() - 3 * DAY));

    const removed = await pruneReleases(d, { keep: 3, now: NOW });
    expect(removed).toEqual([
      ".staging-crashed",
      ".staging-elsewhere-old",
      ".staging-unowned-old",
      "2025-12-01-00-00-00",
      "2026-01-01-00-00-00",
      "2026-02-01-00-00-00",
      "current.tmp-stray",
    ]);
    expect(readdirSync(d).sort()).toEqual([
      ".staging-elsewhere",
      ".staging-live",
      ".staging-unowned-new",
      "2026-03-01-00-00-00",
      "2026-04-01-00-00-00",
      "2026-05-01-00-00-00",
      "2026-06-01-00-00-00",
      "current",
    ]);
    expect(await readCurrent(d)).toBe("2026-03-01-00-00-00");
    // Idempotent.
    expect(await pruneReleases(d, { keep: 3, now: NOW })).toEqual([]);
  });

  it("keeps a release a job holds, until the job lets go or its holder process is gone", async () => {
    const d = dbDir();
    for (const r of ["2026-01-01-00-00-00", "2026-02-01-00-00-00", "2026-03-01-00-00-00"]) release(d, r);
    await swapCurrent(d, "2026-03-01-00-00-00");
    await holdRelease(d, "2026-01-01-00-00-00", "job000000001");
    await holdRelease(d, "2026-01-01-00-00-00", "job000000001"); // marking again is harmless
    expect(await pruneReleases(d, { keep: 1, now: NOW })).toEqual(["2026-02-01-00-00-00"]);
    expect(existsSync(path.join(d, "2026-01-01-00-00-00"))).toBe(true);
    await holdRelease(d, "2026-01-01-00-00-00", "job000000003");
    await releaseHold(d, "2026-01-01-00-00-00", "job000000001");
    // Another job still holds it: its mark and folder stay.
    expect(await pruneReleases(d, { keep: 1, now: NOW })).toEqual([]);
    await releaseHold(d, "2026-01-01-00-00-00", "job000000003");
    // The last one to let go leaves no empty folders behind.
    expect(existsSync(path.join(d, ".in-use"))).toBe(false);
    expect(await pruneReleases(d, { keep: 1, now: NOW })).toEqual(["2026-01-01-00-00-00"]);

    // A marker left by a job API that died no longer holds anything.
    release(d, "2026-04-01-00-00-00");
    await holdRelease(d, "2026-04-01-00-00-00", "job000000002");
    const marker = path.join(d, ".in-use", "2026-04-01-00-00-00", "job000000002");
    writeFileSync(marker, JSON.stringify({ host: os.hostname(), pid: deadPid() }));
    expect(await pruneReleases(d, { keep: 1, now: NOW })).toEqual(["2026-04-01-00-00-00"]);
    expect(existsSync(marker)).toBe(false);
    await expect(holdRelease(d, "../x", "job")).rejects.toThrow(TypeError);
    await expect(holdRelease(d, "2026-04-01-00-00-00", "../../x")).rejects.toThrow(TypeError);
  });

  it("never removes current, even when it is the oldest and keep is 1", async () => {
    const d = dbDir();
    release(d, "2026-01-01-00-00-00");
    release(d, "2026-02-01-00-00-00");
    await swapCurrent(d, "2026-01-01-00-00-00");
    expect(await pruneReleases(d, { keep: 1, now: NOW })).toEqual(["2026-02-01-00-00-00"]);
    expect(existsSync(path.join(d, "2026-01-01-00-00-00", "manifest.json"))).toBe(true);
  });
});
