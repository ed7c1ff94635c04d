// What the install step says while npm installs (npm itself prints only errors, so a first
// `npm ci` was two silent minutes): how many packages, how long it usually takes, and every
// 15 s how many are in place. Plain JavaScript with no dependencies (it runs before the install).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** A first `npm ci` of this lockfile on a laptop (README: the first `npm start` takes about two minutes). */
export const FIRST_INSTALL_ESTIMATE = "about 2 minutes";

/** How many packages the lockfile installs at the top of node_modules (`node_modules/x`, `node_modules/@s/x`). */
export function lockedPackageCount(lockText) {
  const { packages = {} } = JSON.parse(lockText);
  return Object.keys(packages).filter((key) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(key)).length;
}

/** How many packages are in place at the top of `nodeModules` (a folder with a package.json). */
export function installedPackageCount(nodeModules) {
  if (!existsSync(nodeModules)) return 0;
  let count = 0;
  for (const entry of readdirSync(nodeModules, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const names = entry.name.startsWith("@")
      ? readdirSync(path.join(nodeModules, entry.name)).map((name) => path.join(entry.name, name))
      : [entry.name];
    for (const name of names) if (existsSync(path.join(nodeModules, name, "package.json"))) count += 1;
  }
  return count;
}

/** The line printed before the install starts. */
export function startLine(what, total, estimate) {
  return `${what}: ${total} packages, ${estimate} (npm prints only errors; progress every 15 s)…`;
}

/** The line printed every 15 s while npm runs. */
export function progressLine(installed, total, seconds) {
  return `  … ${Math.min(installed, total)} of ${total} packages in place after ${seconds} s`;
}

/** Reads the lockfile next to `root`'s package.json. */
export function readLock(root) {
  return readFileSync(path.join(root, "package-lock.json"), "utf8");
}
