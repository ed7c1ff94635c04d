#!/usr/bin/env node
// The blastplane command line. It finds the running local stack through its data folder
// (BLASTPLANE_DATA_DIR, default .data), so it works with any folder and with free ports.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";

const ROLES = ["Reader", "Contributor", "Approver", "Owner"];

/** Each command's usage: `blastplane <command> --help` prints it without looking for a running stack. */
const COMMANDS = {
  token: `blastplane token --role <${ROLES.join("|")}> [--oid ID] [--name NAME] [--ttl SECONDS] [--json]
      Prints a bearer token that the running local stack accepts
      (--json: {"access_token", "token_type", "expires_in"}).`,
  env: `blastplane env [--json]
      Prints export lines for a shell: DASHBOARD (the web app and /api), JOBAPI (the job API),
      KUBECONFIG (the local Kubernetes API) and BLASTPLANE_DATA_DIR of the running stack, so
      eval "$(npx blastplane env)" makes the documented commands work on any ports and data folder.`,
  "api-token": `blastplane api-token [--json]
      Prints the job API's current X-SVC-API-Token (--json: {"api_token", "created_at"}).`,
  db: `blastplane db add NAME FASTA [--type nucl|prot] [--partitions N] [--json]
      Builds a BLAST database from a FASTA file (makeblastdb) and makes it current
      (--json: the release as a record).`,
  search: `blastplane search --program PROGRAM --db NAME --query FILE|- [--sharded] [--title TEXT] [--evalue X]
                    [--max-target-seqs N] [--priority P] [--wait] [--out FILE | --format xml|tabular]
      Submits a BLAST search and prints its job id; --wait waits for it (progress on stderr), --out or
      --format also saves the results (whole or not at all). Exit codes: 0 done, 1 no local stack,
      2 usage, 3 refused (with each field's reason), 4 the search failed, 5 cancelled, 6 unavailable.
      BLASTPLANE_URL and BLASTPLANE_TOKEN name a deployed dashboard instead of the local stack.`,
  jobs: `blastplane jobs [--status STATUS] [--limit N] [--json]
      Lists recent searches, newest first: job id, status, program, database, created, title.`,
  results: `blastplane results JOB_ID [--format xml|tabular] [--out FILE]
      Writes a completed search's results to standard output or FILE (default xml).`,
  console: `blastplane console [--role <${ROLES.join("|")}> | --token TOKEN] [--eval "TEXT"]... [--json]
      Talks to the operator console: a REPL with tool completion for the role, or one reply per --eval.`,
  notifications: `blastplane notifications [--limit N] [--json]
      Lists the recent notification deliveries: channel, state and receipt.`,
  notify: `blastplane notify test [--route NAME] [--json]
      Sends a marked test A2 notification through the router (default route operational_alert)
      and prints each channel's delivery state and receipt.`,
};
const USAGE = `Usage:
${Object.values(COMMANDS)
  .map((text) => `  ${text}`)
  .join("\n")}
  blastplane --version [--json]
      Prints the version of blastplane.
  blastplane <command> --help
      Prints the command's usage.

The commands find the running local stack through its data folder (BLASTPLANE_DATA_DIR, default .data).`;

/** The package's version (package.json next to bin/). */
function version() {
  return JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
}

/** Prints `record` as one line of JSON, or as `text`. */
function print(json, record, text) {
  process.stdout.write(json ? `${JSON.stringify(record)}\n` : `${text}\n`);
}

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
    options: {
      role: { type: "string" },
      oid: { type: "string" },
      name: { type: "string" },
      ttl: { type: "string" },
      json: { type: "boolean" },
    },
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
  const { access_token, token_type, expires_in } = json;
  print(values.json, { access_token, token_type, expires_in }, access_token);
}

function apiToken(argv) {
  const { values } = parseArgs({ args: argv, options: { json: { type: "boolean" } }, strict: true });
  const stack = runningStack();
  const file = path.join(stack.jobapi_data_dir, "secrets", "jobapi-api-token");
  if (!existsSync(file)) fail("The job API has not created its token yet; wait for it to start.", 1);
  const { current } = JSON.parse(readFileSync(file, "utf8"));
  print(values.json, { api_token: current.value, created_at: current.created_at ?? null }, current.value);
}

/** Quotes `value` for a POSIX shell when it holds anything but safe characters. */
function shellQuote(value) {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", "'\\''")}'`;
}

/** The running stack's addresses as shell exports (or one JSON record). */
function env(argv) {
  const { values } = parseArgs({ args: argv, options: { json: { type: "boolean" } }, strict: true });
  const stack = runningStack();
  const record = {
    DASHBOARD: stack.functions_url,
    JOBAPI: stack.jobapi_url,
    ...(stack.kubeconfig ? { KUBECONFIG: stack.kubeconfig } : {}),
    BLASTPLANE_DATA_DIR: path.resolve(process.env.BLASTPLANE_DATA_DIR ?? ".data"),
  };
  const text = `export ${Object.entries(record)
    .map(([name, value]) => `${name}=${shellQuote(value)}`)
    .join(" ")}`;
  print(values.json, record, text);
}

async function db(argv) {
  const stack = runningStack();
  const cli = new URL("../dist/local/cli-db.js", import.meta.url);
  const { dbCommand } = await import(cli.href);
  await dbCommand(argv, path.join(stack.jobapi_data_dir, "databases"), stack);
}

const [command, ...rest] = process.argv.slice(2);
const HELP_FLAGS = ["--help", "-h"];
try {
  if (Object.hasOwn(COMMANDS, command) && rest.some((arg) => HELP_FLAGS.includes(arg))) {
    // Before anything else: no running stack is needed to read a command's usage.
    process.stdout.write(`Usage:\n  ${COMMANDS[command]}\n`);
  } else {
    switch (command) {
      case "token":
        await token(rest);
        break;
      case "env":
        env(rest);
        break;
      case "api-token":
        apiToken(rest);
        break;
      case "db":
        await db(rest);
        break;
      case "search":
      case "jobs":
      case "results": {
        // BLASTPLANE_URL (+ BLASTPLANE_TOKEN) names a deployed dashboard instead of the local stack.
        const stack = process.env.BLASTPLANE_URL ? undefined : runningStack();
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
      case "notifications":
      case "notify": {
        const stack = runningStack();
        const cli = await import(new URL("../dist/local/cli-notify.js", import.meta.url).href);
        await (command === "notify" ? cli.notifyTestCommand : cli.notificationsCommand)(rest, stack);
        break;
      }
      case "--version":
      case "-v":
      case "version":
        print(rest.includes("--json"), { name: "blastplane", version: version() }, `blastplane ${version()}`);
        break;
      case "help":
        if (rest[0] !== undefined && !Object.hasOwn(COMMANDS, rest[0]))
          fail(`Unknown command "${rest[0]}".\n\n${USAGE}`);
        process.stdout.write(rest[0] === undefined ? `${USAGE}\n` : `Usage:\n  ${COMMANDS[rest[0]]}\n`);
        break;
      case undefined:
      case "--help":
      case "-h":
        process.stdout.write(`${USAGE}\n`);
        break;
      default:
        fail(`Unknown command "${command}".\n\n${USAGE}`);
    }
  }
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
