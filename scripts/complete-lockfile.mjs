// Adds to package-lock.json the entries npm leaves out for other platforms' optional packages
// when the registry it reaches does not serve them (here: biome's binaries for macOS, Windows,
// Android and musl Linux). npm 11's `npm ci` refuses a lockfile missing any optional dependency of
// a locked package; each added entry names the version and platform only (no integrity: the
// registry here has no tarball to take it from), so npm skips it on any other platform and
// fetches it by name and version on its own. Idempotent; run it after `npm install` changes the
// lockfile:  node scripts/complete-lockfile.mjs
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const lockPath = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "package-lock.json");
const lock = JSON.parse(readFileSync(lockPath, "utf8"));

/** Platform fields of a biome CLI package, from its name (`@biomejs/cli-<os>-<cpu>[-musl]`). */
function biomePlatform(name) {
  const match = /^@biomejs\/cli-([a-z0-9]+)-([a-z0-9]+?)(-musl)?$/.exec(name);
  if (!match) return undefined;
  const [, os, cpu, musl] = match;
  return { os: [os], cpu: [cpu], ...(os === "linux" ? { libc: [musl ? "musl" : "glibc"] } : {}) };
}

const added = [];
for (const [key, entry] of Object.entries(lock.packages)) {
  for (const [name, version] of Object.entries(entry.optionalDependencies ?? {})) {
    const at = `${key ? `${key}/` : ""}node_modules/${name}`;
    if (lock.packages[at] || lock.packages[`node_modules/${name}`]) continue;
    const platform = biomePlatform(name);
    if (!platform)
      throw new Error(
        `${name} (optional dependency of ${key}) is missing from the lockfile and is not a platform package this script knows`,
      );
    // Keys in the order npm writes them, so a later `npm install` leaves the entry as it is.
    lock.packages[`node_modules/${name}`] = {
      version,
      cpu: platform.cpu,
      ...(entry.dev ? { dev: true } : {}),
      ...(platform.libc ? { libc: platform.libc } : {}),
      license: entry.license,
      optional: true,
      os: platform.os,
      ...(entry.engines ? { engines: entry.engines } : {}),
    };
    added.push(`${name}@${version}`);
  }
}
if (added.length > 0) {
  // In the order npm writes (its locale-aware compare), so npm leaves the file as it is.
  lock.packages = Object.fromEntries(Object.entries(lock.packages).sort(([a], [b]) => a.localeCompare(b, "en")));
  writeFileSync(lockPath, `${JSON.stringify(lock, null, 2)}\n`);
}
console.log(
  added.length > 0 ? `added ${added.join(", ")}` : "package-lock.json already lists every optional dependency",
);
