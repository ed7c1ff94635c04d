import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => JSON.parse(readFileSync(path.join(ROOT, file), "utf8")) as Record<string, unknown>;

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

describe("package-lock.json is complete, so `npm ci` accepts it", () => {
  const pkg = read("package.json") as { dependencies: Record<string, string>; devDependencies: Record<string, string> };
  const lock = read("package-lock.json") as { lockfileVersion: number; packages: Record<string, LockEntry> };

  /** The entry npm would resolve `name` to from the package at `key` (nested first, then hoisted). */
  function resolved(key: string, name: string): LockEntry | undefined {
    for (let at = key; ; at = at.includes("/node_modules/") ? at.slice(0, at.lastIndexOf("/node_modules/")) : "") {
      const entry = lock.packages[`${at ? `${at}/` : ""}node_modules/${name}`];
      if (entry || at === "") return entry;
    }
  }

  it("records package.json's dependencies as they are", () => {
    expect(lock.lockfileVersion).toBe(3);
    expect(lock.packages[""]?.dependencies).toEqual(pkg.dependencies);
    expect(lock.packages[""]?.devDependencies).toEqual(pkg.devDependencies);
  });

  it("has an entry for every optional dependency of every locked package, other platforms' included", () => {
    const missing = Object.entries(lock.packages).flatMap(([key, entry]) =>
      Object.entries(entry.optionalDependencies ?? {})
        .filter(([name]) => resolved(key, name) === undefined)
        .map(([name, version]) => `${name}@${version} (optional dependency of ${key || "the root"})`),
    );
    expect(missing).toEqual([]);
  });
});
