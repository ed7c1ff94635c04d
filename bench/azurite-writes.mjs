// What one acknowledged Azurite write costs with each way of making it durable (issue 24 item 1),
// measured on Azurite alone so the difference is not lost in a whole stack's noise:
//   off      Azurite's own 5 s autosave (nothing durable at acknowledgement)
//   journal  local/azurite-durable.cjs: the write-ahead journal (one small append + fdatasync)
//   rewrite  a preload that rewrites and fsyncs the whole store before each acknowledgement (what
//            durable writes did before the journal), given as BENCH_REWRITE_PRELOAD=<file> (e.g.
//            `git show 3f5c6e6:local/azurite-durable.cjs > /tmp/rewrite.cjs`); skipped without it
// Each store is first filled with BENCH_STORE_ROWS table rows (the rewrite's cost grows with the
// store); then, per round, each mode in turn (the order rotates) takes sequential entity inserts,
// a burst of concurrent inserts and sequential 64 KB blob uploads. Every round prints the foreign
// CPU load; a round over 0.25 cores is marked disturbed.
//
//   node bench/azurite-writes.mjs    (BENCH_RUNS rounds, default 5)
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { BlobServiceClient } from "@azure/storage-blob";
import { foreignLoadMeter, foreignLoadOf, formatForeignLoad, ROOT } from "./stack.mjs";

const RUNS = Math.max(1, Number(process.env.BENCH_RUNS ?? 5));
const STORE_ROWS = Number(process.env.BENCH_STORE_ROWS ?? 3000);
const SEQUENTIAL = 20;
const BURST = 16;
const BLOBS = 5;
const KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const require = createRequire(import.meta.url);
const cli = path.join(path.dirname(require.resolve("azurite/package.json")), "dist/src/azurite.js");
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const round = (x, d = 1) => Number(x.toFixed(d));
const log = (m) => process.stderr.write(`[azurite-writes ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

async function startAzurite(location, preload) {
  const args = [
    ...(preload ? ["--require", preload] : []),
    cli,
    "--disableTelemetry",
    "--skipApiVersionCheck",
    "--silent",
    "--location",
    location,
    ...["blob", "queue", "table"].flatMap((s) => [`--${s}Host`, "127.0.0.1", `--${s}Port`, "0"]),
  ];
  // NODE_PATH lets a preload copied outside the repository find azurite and lokijs.
  const child = spawn(process.execPath, args, {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, NODE_PATH: path.join(ROOT, "node_modules") },
  });
  const endpoints = {};
  let output = "";
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Azurite did not start:\n${output}`)), 120_000);
    child.stdout.on("data", (chunk) => {
      output += chunk;
      for (const m of chunk.toString().matchAll(/Azurite (Blob|Table) service is successfully listening at (\S+)/g))
        endpoints[m[1].toLowerCase()] = m[2];
      if (endpoints.blob && endpoints.table) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr.on("data", (chunk) => {
      output += chunk;
    });
    child.once("exit", (code) => reject(new Error(`Azurite exited with ${code}:\n${output}`)));
  });
  const connectionString =
    `DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=${KEY};` +
    `BlobEndpoint=${endpoints.blob}/devstoreaccount1;TableEndpoint=${endpoints.table}/devstoreaccount1;`;
  return { child, connectionString };
}

let sequence = 0;
async function measure(target) {
  const sequential = [];
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t0 = performance.now();
    await target.table.createEntity({ partitionKey: "m", rowKey: `s${sequence++}`, value: "x".repeat(300) });
    sequential.push(performance.now() - t0);
  }
  const b0 = performance.now();
  await Promise.all(
    Array.from({ length: BURST }, () =>
      target.table.createEntity({ partitionKey: "m", rowKey: `b${sequence++}`, value: "x".repeat(300) }),
    ),
  );
  const burst = performance.now() - b0;
  const blobs = [];
  const data = randomBytes(64 * 1024);
  for (let i = 0; i < BLOBS; i++) {
    const t0 = performance.now();
    await target.container.getBlockBlobClient(`blob-${sequence++}`).uploadData(data);
    blobs.push(performance.now() - t0);
  }
  return { insert_ms: median(sequential), burst_ms: burst, blob_put_ms: median(blobs) };
}

const modes = [
  ["off", undefined],
  ["journal", path.join(ROOT, "local/azurite-durable.cjs")],
  ...(process.env.BENCH_REWRITE_PRELOAD ? [["rewrite", path.resolve(process.env.BENCH_REWRITE_PRELOAD)]] : []),
];
const tmp = mkdtempSync(path.join(os.tmpdir(), "bp-azurite-writes-"));
const targets = {};
try {
  for (const [mode, preload] of modes) {
    const location = path.join(tmp, mode);
    const { child, connectionString } = await startAzurite(location, preload);
    const table = TableClient.fromConnectionString(connectionString, "bench", { allowInsecureConnection: true });
    await table.createTable();
    const container = BlobServiceClient.fromConnectionString(connectionString).getContainerClient("bench");
    await container.create();
    for (let i = 0; i < STORE_ROWS; i += 100) {
      const rows = Array.from({ length: Math.min(100, STORE_ROWS - i) }, (_, j) => ({
        partitionKey: "fill",
        rowKey: `f${i + j}`,
        value: "y".repeat(300),
      }));
      await table.submitTransaction(rows.map((row) => ["create", row]));
    }
    targets[mode] = { child, table, container };
    log(`${mode}: started, ${STORE_ROWS} rows stored`);
  }
  for (const mode of Object.keys(targets)) await measure(targets[mode]);
  const samples = Object.fromEntries(Object.keys(targets).map((m) => [m, []]));
  const foreign = [];
  const names = Object.keys(targets);
  for (let run = 0; run < RUNS; run++) {
    const meter = foreignLoadMeter();
    const order = names.map((_, i) => names[(i + run) % names.length]);
    for (const mode of order) samples[mode].push(await measure(targets[mode]));
    foreign.push(meter());
    log(
      `run ${run + 1}/${RUNS}: ${names.map((m) => `${m} insert ${round(samples[m].at(-1).insert_ms)} ms`).join(", ")}; foreign load ${formatForeignLoad([foreign.at(-1)])} cores`,
    );
  }
  const result = Object.fromEntries(
    names.map((m) => [
      m,
      Object.fromEntries(
        ["insert_ms", "burst_ms", "blob_put_ms"].map((k) => [k, round(median(samples[m].map((s) => s[k])))]),
      ),
    ]),
  );
  const lines = [
    "",
    `Azurite acknowledged-write cost, median of ${RUNS} interleaved rounds, store of ${STORE_ROWS} rows`,
    `mode      insert (sequential)  ${BURST} concurrent inserts  64 KB blob put`,
    ...names.map(
      (m) =>
        `${m.padEnd(9)} ${`${result[m].insert_ms} ms`.padEnd(20)} ${`${result[m].burst_ms} ms`.padEnd(21)} ${result[m].blob_put_ms} ms`,
    ),
    `foreign CPU load, cores per round (* over 0.25: disturbed): ${formatForeignLoad(foreign)}`,
    "",
  ];
  process.stdout.write(lines.join("\n"));
  process.stdout.write(
    `${JSON.stringify({ bench: "azurite-writes", store_rows: STORE_ROWS, runs: RUNS, ...result, ...foreignLoadOf(foreign), date: new Date().toISOString(), machine: { cpus: os.availableParallelism(), node: process.version } })}\n`,
  );
} finally {
  for (const { child } of Object.values(targets)) child.kill("SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
}
