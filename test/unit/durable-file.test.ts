import { spawn } from "node:child_process";
import { once } from "node:events";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { syncTree, writeFileDurably, writeFileDurablySync } from "../../shared/storage/durable-file.js";

const dirs: string[] = [];
function folder(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "bp-durable-file-"));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe("durable writes of the stack's own files (issue 15 item 3)", () => {
  it("replaces a file whole, with the asked mode, leaving no temp file behind", async () => {
    const dir = folder();
    const file = path.join(dir, "secret");
    writeFileSync(file, "old");
    await writeFileDurably(file, "new value", { mode: 0o600 });
    expect(readFileSync(file, "utf8")).toBe("new value");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    writeFileDurablySync(file, "sync value", { mode: 0o600 });
    expect(readFileSync(file, "utf8")).toBe("sync value");
    expect(readdirSync(dir)).toEqual(["secret"]);
  });

  it("concurrent writes leave one complete value, never a mix, and no temp files", async () => {
    const dir = folder();
    const file = path.join(dir, "pointer");
    const values = Array.from({ length: 20 }, (_, i) => String(i).repeat(50_000));
    await Promise.all(values.map((v) => writeFileDurably(file, v)));
    expect(values).toContain(readFileSync(file, "utf8"));
    expect(readdirSync(dir)).toEqual(["pointer"]);
  });

  it("a failed write leaves the old file and removes its temp file", async () => {
    const dir = folder();
    const file = path.join(dir, "missing-folder", "x");
    await expect(writeFileDurably(file, "data")).rejects.toThrow(/ENOENT/);
    expect(() => writeFileDurablySync(file, "data")).toThrow(/ENOENT/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a writer killed with SIGKILL mid-stream leaves the last whole value, never a torn one", async () => {
    const dir = folder();
    const file = path.join(dir, "stack.json");
    const moduleUrl = new URL("../../shared/storage/durable-file.ts", import.meta.url).href;
    // Each value is 1 MiB of one digit: a torn write would show two digits or a short file.
    const script = `
      const { writeFileDurablySync } = await import(${JSON.stringify(moduleUrl)});
      for (let i = 0; ; i++) {
        writeFileDurablySync(${JSON.stringify(file)}, String(i % 10).repeat(1 << 20));
        if (i === 2) process.stdout.write("written\\n");
      }`;
    const child = spawn(
      process.execPath,
      ["--experimental-strip-types", "--no-warnings", "--input-type=module", "-e", script],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    await once(child.stdout, "data");
    child.kill("SIGKILL");
    await once(child, "exit");
    const text = readFileSync(file, "utf8");
    expect(text.length).toBe(1 << 20);
    expect(new Set(text).size).toBe(1);
  });

  it("syncTree walks a built folder (files and sub-folders) without changing it", async () => {
    const dir = folder();
    mkdirSync(path.join(dir, "parts", "p0"), { recursive: true });
    writeFileSync(path.join(dir, "parts", "p0", "db.nsq"), "x");
    writeFileSync(path.join(dir, "manifest.json"), "{}");
    await syncTree(dir);
    expect(existsSync(path.join(dir, "parts", "p0", "db.nsq"))).toBe(true);
    await expect(syncTree(path.join(dir, "nope"))).rejects.toThrow(/ENOENT/);
  });
});
