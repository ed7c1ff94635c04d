// `blastplane search`, `blastplane jobs`, `blastplane results`: BLAST searches from a terminal or a
// script, through the dashboard API (the jobs appear in the web app too). Progress goes to stderr,
// data to stdout or --out, and the exit code says how it ended (EXIT below).
import { randomUUID } from "node:crypto";
import { createWriteStream, readFileSync, renameSync, rmSync } from "node:fs";
import { userInfo } from "node:os";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parseArgs } from "node:util";

/** Exit codes by outcome; scripts branch on them (documented in docs/researchers.md). */
export const EXIT = {
  ok: 0,
  noStack: 1,
  usage: 2,
  refused: 3,
  failed: 4,
  cancelled: 5,
  unavailable: 6,
};

const PROGRAMS = ["blastn", "blastp", "blastx", "tblastn", "tblastx"];
const FORMATS = ["xml", "tabular"];
const FINISHED = ["completed", "failed", "cancelled"];

export const SEARCH_USAGE = `Usage: blastplane search --program PROGRAM --db NAME --query FILE [options]
  Submits a BLAST search to the running stack (or BLASTPLANE_URL) and prints its job id.
  --program blastn|blastp|blastx|tblastn|tblastx
  --db NAME            a prepared database (see the web app's Databases page)
  --query FILE         query FASTA; - reads standard input
  --sharded            search the database's partitions one by one (databases larger than a node's memory)
  --title TEXT         a title shown in the web app
  --evalue X           e-value threshold
  --max-target-seqs N  maximum hits per query
  --priority low|normal|high|urgent
  --wait               wait until the search ends, with progress on stderr
  --out FILE           when it completes, save the results to FILE (implies --wait)
  --format xml|tabular results format for --out or standard output (implies --wait; default xml)
Exit codes: 0 done, 1 no local stack, 2 usage, 3 refused by the service, 4 the search failed,
5 it was cancelled, 6 the service is unavailable or a download broke off.`;

export const JOBS_USAGE = `Usage: blastplane jobs [--status STATUS] [--limit N] [--json]
  Lists recent searches, newest first: job id, status, program, database, title, created.`;

export const RESULTS_USAGE = `Usage: blastplane results JOB_ID [--format xml|tabular] [--out FILE]
  Writes a completed search's results to standard output or FILE (default format xml).`;

class CliError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}

/** What a refused or failed answer says, one line per field issue. */
function describeRefusal(status, body) {
  const detail = body?.detail;
  if (Array.isArray(detail)) {
    return detail
      .map(
        (issue) =>
          `  ${Array.isArray(issue.loc) ? issue.loc.slice(1).join(".") || "request" : "request"}: ${issue.msg}`,
      )
      .join("\n");
  }
  return `  ${typeof detail === "string" ? detail : `HTTP ${status}`}`;
}

/** The dashboard API of the running stack (or BLASTPLANE_URL), as a Contributor. */
async function dashboardClient(stack) {
  const base = (process.env.BLASTPLANE_URL ?? stack?.functions_url ?? "").replace(/\/+$/, "");
  if (!base)
    throw new CliError(
      "No local stack is running (start one with: npm start), and BLASTPLANE_URL is not set.",
      EXIT.noStack,
    );
  let bearer = process.env.BLASTPLANE_TOKEN;
  if (!bearer) {
    if (!stack) throw new CliError("Set BLASTPLANE_TOKEN to a bearer token for BLASTPLANE_URL.", EXIT.usage);
    // The local stack's identity provider: a Contributor named after this account.
    const res = await request(`${stack.idp_url}/dev/token`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ role: "Contributor", name: userInfo().username }),
    });
    const json = await res.json().catch(() => ({}));
    if (res.status !== 200)
      throw new CliError(`The identity provider refused:\n${describeRefusal(res.status, json)}`, EXIT.unavailable);
    bearer = json.access_token;
  }
  const headers = { Authorization: `Bearer ${bearer}` };
  return {
    base,
    async json(method, route, body) {
      const res = await request(`${base}/api${route}`, {
        method,
        headers: body === undefined ? headers : { ...headers, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json = await res.json().catch(() => ({}));
      if (res.status >= 200 && res.status < 300) return json;
      throw answerError(res.status, json);
    },
    async download(route) {
      const res = await request(`${base}/api${route}`, { headers });
      if (res.status !== 200 || !res.body) throw answerError(res.status, await res.json().catch(() => ({})));
      return res.body;
    },
  };
}

async function request(url, init) {
  try {
    return await fetch(url, init);
  } catch (error) {
    throw new CliError(
      `Cannot reach ${new URL(url).origin}: ${error.cause?.message ?? error.message}`,
      EXIT.unavailable,
    );
  }
}

function answerError(status, body) {
  const text = describeRefusal(status, body);
  if (status === 401 || status === 403)
    return new CliError(`The service refused the credentials (${status}):\n${text}`, EXIT.refused);
  if (status === 429 || status >= 500)
    return new CliError(`The service is unavailable (${status}); try again later:\n${text}`, EXIT.unavailable);
  return new CliError(`The service refused the request (${status}):\n${text}`, EXIT.refused);
}

/** Saves a results stream to `out` (whole or not at all) or writes it to stdout. */
async function save(body, out) {
  const source = Readable.fromWeb(body);
  try {
    if (!out) {
      await pipeline(source, process.stdout, { end: false });
      return;
    }
    // Written beside the target and renamed when complete: a broken download leaves no short file.
    const partial = `${out}.part`;
    try {
      await pipeline(source, createWriteStream(partial));
      renameSync(partial, out);
    } catch (error) {
      rmSync(partial, { force: true });
      throw error;
    }
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(`The download broke off: ${error.cause?.message ?? error.message}`, EXIT.unavailable);
  }
}

function progressLine(job, startedAt) {
  const seconds = Math.round((Date.now() - startedAt) / 1000);
  const p = job.progress;
  const shards =
    p && p.total > 0 ? `, ${p.succeeded} of ${p.total} shards done${p.failed ? `, ${p.failed} failed` : ""}` : "";
  return `${job.job_id}: ${job.status}${shards} (${seconds} s)`;
}

/** Polls the job until it ends, writing each change to stderr. */
async function waitFor(api, jobId) {
  const startedAt = Date.now();
  let last = "";
  for (;;) {
    const job = await api.json("GET", `/blast/jobs/${jobId}`);
    const line = progressLine(job, startedAt);
    const shown = line.replace(/ \(\d+ s\)$/, "");
    if (shown !== last) {
      process.stderr.write(`${line}\n`);
      last = shown;
    }
    if (FINISHED.includes(job.status)) return job;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function parse(argv, options, usage, allowPositionals = false) {
  try {
    return parseArgs({
      args: argv,
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals,
      strict: true,
    });
  } catch (error) {
    throw new CliError(`${error.message}\n\n${usage}`, EXIT.usage);
  }
}

function number(value, name) {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new CliError(`${name} must be a number\n\n${SEARCH_USAGE}`, EXIT.usage);
  return n;
}

async function searchCommand(argv, stack) {
  const { values } = parse(
    argv,
    {
      program: { type: "string" },
      db: { type: "string" },
      query: { type: "string" },
      sharded: { type: "boolean" },
      title: { type: "string" },
      evalue: { type: "string" },
      "max-target-seqs": { type: "string" },
      priority: { type: "string" },
      wait: { type: "boolean" },
      out: { type: "string" },
      format: { type: "string" },
    },
    SEARCH_USAGE,
  );
  if (values.help) return void process.stdout.write(`${SEARCH_USAGE}\n`);
  if (!values.program || !PROGRAMS.includes(values.program))
    throw new CliError(`--program must be one of ${PROGRAMS.join(", ")}\n\n${SEARCH_USAGE}`, EXIT.usage);
  if (!values.db) throw new CliError(`--db is required\n\n${SEARCH_USAGE}`, EXIT.usage);
  if (!values.query) throw new CliError(`--query is required\n\n${SEARCH_USAGE}`, EXIT.usage);
  if (values.format !== undefined && !FORMATS.includes(values.format))
    throw new CliError(`--format must be xml or tabular\n\n${SEARCH_USAGE}`, EXIT.usage);
  let queryFasta;
  try {
    queryFasta = readFileSync(values.query === "-" ? 0 : values.query, "utf8");
  } catch (error) {
    throw new CliError(`Cannot read the query ${values.query}: ${error.message}`, EXIT.usage);
  }
  const options = {};
  const evalue = number(values.evalue, "--evalue");
  const maxTargetSeqs = number(values["max-target-seqs"], "--max-target-seqs");
  if (evalue !== undefined) options.evalue = evalue;
  if (maxTargetSeqs !== undefined) options.max_target_seqs = maxTargetSeqs;
  const api = await dashboardClient(stack);
  const submitted = await api.json("POST", "/blast/jobs", {
    program: values.program,
    db: values.db,
    query_fasta: queryFasta,
    execution_profile: values.sharded ? "sharded" : "standard",
    // One key per invocation: a retried request inside it is the same search, never two.
    idempotency_key: `cli-${randomUUID()}`,
    ...(values.title ? { title: values.title } : {}),
    ...(values.priority ? { priority: values.priority } : {}),
    ...(Object.keys(options).length > 0 ? { options } : {}),
  });
  const jobId = submitted.job_id;
  process.stderr.write(
    `submitted ${jobId} (${values.program} on ${values.db}); web: ${api.base}/blast/jobs/${jobId}\n`,
  );
  const wantsResults = values.out !== undefined || values.format !== undefined;
  if (!values.wait && !wantsResults) {
    process.stdout.write(`${jobId}\n`);
    return;
  }
  const job = await waitFor(api, jobId);
  if (job.status === "failed") throw new CliError(`The search failed: ${job.error || "no reason given"}`, EXIT.failed);
  if (job.status === "cancelled") throw new CliError("The search was cancelled.", EXIT.cancelled);
  if (!wantsResults) {
    process.stdout.write(`${jobId}\n`);
    return;
  }
  await save(await api.download(`/blast/jobs/${jobId}/results?content=${values.format ?? "xml"}`), values.out);
  if (values.out) process.stderr.write(`results saved to ${values.out}\n`);
}

async function jobsCommand(argv, stack) {
  const { values } = parse(
    argv,
    { status: { type: "string" }, limit: { type: "string" }, json: { type: "boolean" } },
    JOBS_USAGE,
  );
  if (values.help) return void process.stdout.write(`${JOBS_USAGE}\n`);
  const limit = values.limit === undefined ? 25 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw new CliError(`--limit must be a whole number from 1 to 100\n\n${JOBS_USAGE}`, EXIT.usage);
  const api = await dashboardClient(stack);
  const query = new URLSearchParams({ page_size: String(limit) });
  if (values.status) query.set("status", values.status);
  const { jobs } = await api.json("GET", `/blast/jobs?${query}`);
  if (values.json) return void process.stdout.write(`${JSON.stringify(jobs, null, 2)}\n`);
  const rows = [["JOB ID", "STATUS", "PROGRAM", "DATABASE", "CREATED", "TITLE"]];
  for (const job of jobs) rows.push([job.job_id, job.status, job.program, job.db, job.created_at, job.title ?? ""]);
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  for (const row of rows)
    process.stdout.write(
      `${row
        .map((cell, i) => String(cell).padEnd(i === row.length - 1 ? 0 : widths[i]))
        .join("  ")
        .trimEnd()}\n`,
    );
}

async function resultsCommand(argv, stack) {
  const { values, positionals } = parse(
    argv,
    { format: { type: "string" }, out: { type: "string" } },
    RESULTS_USAGE,
    true,
  );
  if (values.help) return void process.stdout.write(`${RESULTS_USAGE}\n`);
  if (positionals.length !== 1) throw new CliError(`Give one JOB_ID.\n\n${RESULTS_USAGE}`, EXIT.usage);
  if (values.format !== undefined && !FORMATS.includes(values.format))
    throw new CliError(`--format must be xml or tabular\n\n${RESULTS_USAGE}`, EXIT.usage);
  const api = await dashboardClient(stack);
  const job = await api.json("GET", `/blast/jobs/${encodeURIComponent(positionals[0])}`);
  if (job.status === "failed") throw new CliError(`The search failed: ${job.error || "no reason given"}`, EXIT.failed);
  if (job.status === "cancelled") throw new CliError("The search was cancelled; it has no results.", EXIT.cancelled);
  if (job.status !== "completed")
    throw new CliError(
      `The search is ${job.status}; wait for it (blastplane search --wait) and try again.`,
      EXIT.refused,
    );
  await save(await api.download(`/blast/jobs/${job.job_id}/results?content=${values.format ?? "xml"}`), values.out);
}

const COMMANDS = { search: searchCommand, jobs: jobsCommand, results: resultsCommand };

/**
 * Runs `command` with `argv`; `stack` is the running local stack's stack.json (undefined when none
 * runs and BLASTPLANE_URL names a deployed dashboard). Exits with the outcome's code.
 */
export async function researchCommand(command, argv, stack) {
  try {
    await COMMANDS[command](argv, stack);
  } catch (error) {
    const code = error instanceof CliError ? error.code : EXIT.unavailable;
    process.stderr.write(`${error.message}\n`);
    process.exitCode = code;
  }
}
