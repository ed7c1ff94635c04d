import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
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

describe("the install step says what it does while npm runs (issue 23 item 10)", () => {
  it("counts the lockfile's top-level packages and those in place, and words the start and progress lines", async () => {
    const progress = await import("../../scripts/install-progress.mjs");
    const lock = JSON.stringify({
      packages: {
        "": {},
        "node_modules/a": {},
        "node_modules/@s/b": {},
        "node_modules/a/node_modules/c": {},
      },
    });
    expect(progress.lockedPackageCount(lock)).toBe(2);
    const dir = mkdtempSync(path.join(tmpdir(), "install-"));
    try {
      for (const pkg of ["a", "@s/b", "half-extracted"]) mkdirSync(path.join(dir, pkg), { recursive: true });
      for (const pkg of ["a", "@s/b"]) writeFileSync(path.join(dir, pkg, "package.json"), "{}");
      mkdirSync(path.join(dir, ".bin"));
      expect(progress.installedPackageCount(dir)).toBe(2);
      expect(progress.installedPackageCount(path.join(dir, "missing"))).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(progress.startLine("Installing npm packages (npm ci)", 812, progress.FIRST_INSTALL_ESTIMATE)).toBe(
      "Installing npm packages (npm ci): 812 packages, about 2 minutes (npm prints only errors; progress every 15 s)…",
    );
    expect(progress.progressLine(300, 812, 45)).toBe("  … 300 of 812 packages in place after 45 s");
    // The real lockfile installs hundreds of packages: the count is read from it, not guessed.
    expect(progress.lockedPackageCount(readFileSync(path.join(ROOT, "package-lock.json"), "utf8"))).toBeGreaterThan(
      100,
    );
  });
});
