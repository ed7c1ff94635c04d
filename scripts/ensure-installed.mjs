// Makes a fresh clone runnable: installs npm packages when node_modules is missing or older than
// the lockfile, and checks for BLAST+, openssl and kubectl and, with --with-browser, Chromium (installing them with
// apt-get when running as root).
// Plain JavaScript with no dependencies, so it runs on the machine's own Node before anything else.
// The npm scripts then run everything else with node_modules/.bin/node (the `node` package, Node
// 22) by path: the shell that runs a script looked `node` up before this install linked it, and
// keeps using what it found (the machine's Node) for the rest of the script.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  FIRST_INSTALL_ESTIMATE,
  installedPackageCount,
  lockedPackageCount,
  progressLine,
  readLock,
  startLine,
} from "./install-progress.mjs";

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

/**
 * Runs npm (which prints only errors, below) saying what it does, roughly how long it takes, and
 * every 15 s how many packages are in place, so a first install is not two silent minutes.
 */
async function npmInstall(args, what, estimate) {
  const total = lockedPackageCount(readLock(root));
  console.log(startLine(what, total, estimate));
  const started = Date.now();
  const seconds = () => Math.round((Date.now() - started) / 1000);
  const child = spawn("npm", args, { cwd: root, stdio: "inherit" });
  const timer = setInterval(
    () => console.log(progressLine(installedPackageCount(path.join(root, "node_modules")), total, seconds())),
    15_000,
  );
  const status = await new Promise((resolve) => child.on("close", (code, signal) => resolve(code ?? signal)));
  clearInterval(timer);
  if (status !== 0) {
    console.error(`\nnpm ${args.join(" ")} failed (exit ${status}).`);
    process.exit(typeof status === "number" ? status : 1);
  }
  console.log(`npm packages installed in ${seconds()} s.`);
}

// Errors only: installing on the machine's Node 20 prints one EBADENGINE warning per package that
// wants Node 22, which is what the scripts run on once the install is done.
const QUIET = ["--no-audit", "--no-fund", "--loglevel=error"];
if (!existsSync(marker)) {
  await npmInstall(
    ["ci", ...QUIET],
    "Installing npm packages (npm ci: exactly package-lock.json)",
    FIRST_INSTALL_ESTIMATE,
  );
} else if (statSync(marker).mtimeMs < statSync(lock).mtimeMs) {
  await npmInstall(
    ["install", ...QUIET],
    "Updating npm packages to package-lock.json (npm install)",
    "usually under a minute",
  );
}
const node22 = path.join(root, "node_modules", ".bin", "node");
if (!existsSync(node22)) {
  console.error(
    `\n${node22} is missing: the devDependency "node" did not install its binary. Run npm ci and look for its error.`,
  );
  process.exit(1);
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

const isRoot = typeof process.getuid === "function" && process.getuid() === 0;
let aptUpdated = false;

/** Installs a Debian package as root, or prints the command and stops. */
function aptInstall(what, pkg, installed) {
  if (!isRoot) {
    console.error(
      `${what} is not installed. Install it, then run this command again:\n\n  sudo apt-get update && sudo apt-get install -y ${pkg}\n`,
    );
    process.exit(1);
  }
  console.log(`Installing ${what} (apt-get install ${pkg}; usually a minute or two, apt prints only errors)…`);
  if (!aptUpdated) run("apt-get", ["update", "-qq"]);
  aptUpdated = true;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const r = spawnSync("apt-get", ["install", "-y", "-qq", pkg], { cwd: root, stdio: "inherit", env });
  if (r.status !== 0 || !installed()) {
    console.error(`Installing ${what} failed; install the Debian package ${pkg} and retry.`);
    process.exit(1);
  }
}

if (process.env.BLASTPLANE_SKIP_BLAST_CHECK !== "1" && !hasBlast()) aptInstall("BLAST+", "ncbi-blast+", hasBlast);

// The local Kubernetes API (BLASTPLANE_EXECUTOR=kubernetes) serves TLS with a certificate openssl
// makes, and its tests use Debian's kubectl as an independent client.
if (process.env.BLASTPLANE_SKIP_KUBECTL_CHECK !== "1") {
  const hasOpenssl = () => has("openssl", ["version"]);
  const hasKubectl = () => has("kubectl", ["version", "--client"]);
  if (!hasOpenssl()) aptInstall("openssl", "openssl", hasOpenssl);
  if (!hasKubectl()) aptInstall("kubectl", "kubectl", hasKubectl);
}

// The end-to-end tests drive Debian's Chromium (browser downloads are not reachable here);
// `npm test` asks for it with --with-browser, `npm start` does not need it.
const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const hasChromium = () => existsSync(chromiumPath);
if (process.argv.includes("--with-browser") && !hasChromium()) {
  if (process.env.CHROMIUM_PATH) {
    console.error(`CHROMIUM_PATH names ${chromiumPath}, which does not exist.`);
    process.exit(1);
  }
  aptInstall("Chromium", "chromium", hasChromium);
}
