#!/usr/bin/env node
// The blastplane command line. It finds the running local stack through its data folder
// (BLASTPLANE_DATA_DIR, default .data), so it works with any folder and with free ports.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

const ROLES = ["Reader", "Contributor", "Approver", "Owner"];
const USAGE = `Usage:
  blastplane token --role <${ROLES.join("|")}> [--oid ID] [--name NAME] [--ttl SECONDS]
      Prints a bearer token that the running local stack accepts.
  blastplane api-token
      Prints the job API's current X-SVC-API-Token.
  blastplane db add NAME FASTA [--type nucl|prot] [--partitions N]
      Builds a BLAST database from a FASTA file (makeblastdb) and makes it current.
  blastplane search --program PROGRAM --db NAME --query FILE [--sharded] [--wait] [--out FILE | --format xml|tabular]
      Submits a BLAST search; with --wait, --out or --format waits for it (progress on stderr).
  blastplane jobs [--status STATUS] [--limit N] [--json]
      Lists recent searches.
  blastplane results JOB_ID [--format xml|tabular] [--out FILE]
      Writes a completed search's results.
  blastplane console [--role <${ROLES.join("|")}> | --token TOKEN] [--eval "TEXT"]... [--json]
      Talks to the operator console: a REPL with tool completion for the role, or one reply per --eval.`;

function fail(message, code = 2) {
  process.stderr.write(`${message}\n`);
  process.exit(code);
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

function runningStack() {
  const dataDir = path.resolve(process.env.BLASTPLANE_DATA_DIR ?? ".data");
  const file = path.join(dataDir, "stack.json");
  if (!existsSync(file)) fail(`No local stack is running on ${dataDir} (start one with: npm start).`, 1);
  let stack;
  try {
    stack = JSON.parse(readFileSync(file, "utf8"));
  } catch {
    fail(`${file} is unreadable; restart the local stack.`, 1);
  }
  if (!alive(stack.pid)) fail(`The local stack on ${dataDir} is not running (start it with: npm start).`, 1);
  return stack;
}

async function token(argv) {
  const { values } = parseArgs({
    args: argv,
    options: { role: { type: "string" }, oid: { type: "string" }, name: { type: "string" }, ttl: { type: "string" } },
    strict: true,
  });
  if (!values.role || !ROLES.includes(values.role)) fail(`--role must be one of ${ROLES.join(", ")}\n\n${USAGE}`);
  const body = { role: values.role };
  if (values.oid !== undefined) body.oid = values.oid;
  if (values.name !== undefined) body.name = values.name;
  if (values.ttl !== undefined) {
    const ttl = Number(values.ttl);
    if (!Number.isInteger(ttl)) fail("--ttl must be a whole number of seconds");
    body.ttl_seconds = ttl;
  }
  const stack = runningStack();
  const res = await fetch(`${stack.idp_url}/dev/token`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = await res.json().catch(() => ({}));
  if (res.status !== 200) fail(`The identity provider refused: ${JSON.stringify(json.detail ?? json)}`, 1);
  process.stdout.write(`${json.access_token}\n`);
}

function apiToken() {
  const stack = runningStack();
  const file = path.join(stack.jobapi_data_dir, "secrets", "jobapi-api-token");
  if (!existsSync(file)) fail("The job API has not created its token yet; wait for it to start.", 1);
  process.stdout.write(`${JSON.parse(readFileSync(file, "utf8")).current.value}\n`);
}

async function db(argv) {
  const stack = runningStack();
  const cli = new URL("../dist/local/cli-db.js", import.meta.url);
  const { dbCommand } = await import(cli.href);
  await dbCommand(argv, path.join(stack.jobapi_data_dir, "databases"), stack);
}

const [command, ...rest] = process.argv.slice(2);
try {
  switch (command) {
    case "token":
      await token(rest);
      break;
    case "api-token":
      apiToken();
      break;
    case "db":
      await db(rest);
      break;
    case "search":
    case "jobs":
    case "results": {
      // --help needs no stack; BLASTPLANE_URL (+ BLASTPLANE_TOKEN) names a deployed dashboard instead.
      const wantsHelp = rest.includes("--help") || rest.includes("-h");
      const stack = wantsHelp || process.env.BLASTPLANE_URL ? undefined : runningStack();
      const { researchCommand } = await import("./blastplane-search.mjs");
      await researchCommand(command, rest, stack);
      break;
    }
    case "console": {
      const { consoleCommand } = await import("./blastplane-console.mjs");
      await consoleCommand(rest, {
        stack: runningStack(),
        dataDir: path.resolve(process.env.BLASTPLANE_DATA_DIR ?? ".data"),
        fail,
        roles: ROLES,
      });
      break;
    }
    case undefined:
    case "help":
    case "--help":
    case "-h":
      process.stdout.write(`${USAGE}\n`);
      break;
    default:
      fail(`Unknown command "${command}".\n\n${USAGE}`);
  }
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
