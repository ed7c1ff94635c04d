// Makes a fresh clone runnable: installs npm packages when node_modules is missing or older than
// the lockfile, and checks for BLAST+ (installing it with apt-get when running as root).
// Plain JavaScript with no dependencies, so it runs on the machine's own Node before anything else.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const lock = path.join(root, "package-lock.json");
const marker = path.join(root, "node_modules", ".package-lock.json");

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`\n${cmd} ${args.join(" ")} failed (exit ${r.status ?? r.signal}).`);
    process.exit(r.status ?? 1);
  }
}

const stale = !existsSync(marker) || statSync(marker).mtimeMs < statSync(lock).mtimeMs;
if (stale) {
  console.log("Installing npm packages (npm install from package-lock.json)…");
  // Not `npm ci`: npm 11 refuses this lockfile for omitting other platforms' optional packages
  // (biome's binaries); `npm install` installs the same locked versions.
  run("npm", ["install", "--no-audit", "--no-fund"]);
}

function has(command, args) {
  try {
    execFileSync(command, args, { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

function hasBlast() {
  return has("blastn", ["-version"]) && has("makeblastdb", ["-version"]);
}

if (process.env.BLASTPLANE_SKIP_BLAST_CHECK !== "1" && !hasBlast()) {
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (!isRoot) {
    console.error("BLAST+ is not installed. Install it, then run this command again:\n\n  sudo apt-get update && sudo apt-get install -y ncbi-blast+\n");
    process.exit(1);
  }
  console.log("Installing BLAST+ (apt-get install ncbi-blast+)…");
  run("apt-get", ["update", "-qq"]);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const r = spawnSync("apt-get", ["install", "-y", "-qq", "ncbi-blast+"], { cwd: root, stdio: "inherit", env });
  if (r.status !== 0 || !hasBlast()) {
    console.error("Installing BLAST+ failed; install the Debian package ncbi-blast+ and retry.");
    process.exit(1);
  }
}


// The local Kubernetes API (BLASTPLANE_EXECUTOR=kubernetes) serves TLS with a certificate openssl
// makes, and its tests use Debian's kubectl as an independent client.
const missing = [
  ["openssl", ["version"], "openssl"],
  ["kubectl", ["version", "--client"], "kubectl"],
].filter(([command, args]) => !has(command, args));
if (process.env.BLASTPLANE_SKIP_KUBECTL_CHECK !== "1" && missing.length > 0) {
  const packages = missing.map(([, , pkg]) => pkg);
  const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
  if (!isRoot) {
    console.error(`${packages.join(" and ")} ${packages.length > 1 ? "are" : "is"} not installed. Install, then run this command again:\n\n  sudo apt-get update && sudo apt-get install -y ${packages.join(" ")}\n`);
    process.exit(1);
  }
  console.log(`Installing ${packages.join(", ")} (apt-get install)…`);
  run("apt-get", ["update", "-qq"]);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const r = spawnSync("apt-get", ["install", "-y", "-qq", ...packages], { cwd: root, stdio: "inherit", env });
  if (r.status !== 0) {
    console.error(`Installing ${packages.join(", ")} failed; install the Debian package(s) and retry.`);
    process.exit(1);
  }
}
