import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { type FakeNcbiServer, startFakeNcbiServer } from "../fakes/ncbi-server.js";
import { prng } from "../support/helpers.js";
import { DEMO_DB, demoQueries, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";

/**
 * Issue 15's power-cut mode: every process of the stack (its process group: Azurite, the job API,
 * BLAST+) is SIGKILLed right after a round of acknowledged writes, at a random moment, and the
 * stack restarted on the same data folder. Nothing acknowledged may be lost, every accepted job
 * must reach a terminal state exactly once, and no orchestration may stay stuck.
 *
 * `POWER_CUT_ROUNDS` sets the number of cuts (2 in `npm test`), `POWER_CUT_SEED` replays a run.
 */
const ROUNDS = Number(process.env.POWER_CUT_ROUNDS ?? 2);
const SEED = Number(process.env.POWER_CUT_SEED ?? Date.now() % 1_000_000);
const TERMINAL_JOB = new Set(["completed", "failed", "cancelled"]);
const TERMINAL_OPERATION = new Set(["succeeded", "failed", "cancelled"]);
const RUNNING_ORCHESTRATION = ["Pending", "Running"];
const PREPARED_DB = "pc_ref_16s";

/** Everything the stack acknowledged, to be found again after every cut. */
interface Acknowledged {
  jobApiJobs: Set<string>;
  /** Job-API jobs whose cancel was acknowledged as `cancelled`. */
  cancelled: Set<string>;
  dashboardJobs: Map<string, string>;
  /** The first terminal status seen for each job: it may never change afterwards. */
  terminal: Map<string, string>;
  token: string | undefined;
  workspace: { etag: string; node_count: number } | undefined;
  added: Map<string, string>;
  prepared: { release: string; operationId: string }[];
}

type Act = (round: number) => Promise<void>;

const stacks: TestStack[] = [];
const folders: string[] = [];
let ncbi: FakeNcbiServer | undefined;

afterAll(async () => {
  for (const s of stacks) await s.stop();
  await ncbi?.close();
  for (const f of folders) rmSync(f, { recursive: true, force: true });
});

describe(`power cut of the whole embedded stack (issue 15; ${ROUNDS} rounds, seed ${SEED})`, () => {
  it(
    "loses nothing acknowledged, finishes every accepted job exactly once and leaves no orchestration stuck",
    async () => {
      // Seeded, so a failing run can be replayed with its seed.
      const rand = prng(SEED);
      const dataDir = mkdtempSync(path.join(tmpdir(), "bp-power-cut-"));
      const work = mkdtempSync(path.join(tmpdir(), "bp-power-cut-work-"));
      folders.push(dataDir, work);
      ncbi = await startFakeNcbiServer();
      const env = { DATABASE_SOURCE_URL: ncbi.url, JOB_POLL_INTERVAL_SECONDS: "1" };
      const ack: Acknowledged = {
        jobApiJobs: new Set(),
        cancelled: new Set(),
        dashboardJobs: new Map(),
        terminal: new Map(),
        token: undefined,
        workspace: undefined,
        added: new Map(),
        prepared: [],
      };

      let stack = await startStack({ dataDir, inMemory: false, detached: true, env });
      stacks.push(stack);
      let contributor = await mintToken(stack, "Contributor");
      let owner = await mintToken(stack, "Owner");
      // Within a round the job API is called with the token current at its start: a regenerated
      // token reaches the running job API only after its 2 s cache, the old one stays valid for an
      // hour. After a restart the last regenerated token must be the one in force.
      let roundToken = readApiToken(stack);
      const jobApi = (method: string, route: string, body?: unknown) =>
        fetch(`${stack.info.jobapi_url}${route}`, {
          method,
          headers: {
            "X-SVC-API-Token": roundToken,
            ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      const dashboard = (
        token: string,
        method: string,
        route: string,
        body?: unknown,
        headers: Record<string, string> = {},
      ) =>
        fetch(`${stack.info.functions_url}/api${route}`, {
          method,
          headers: {
            Authorization: `Bearer ${token}`,
            ...headers,
            ...(body === undefined ? {} : { "Content-Type": "application/json" }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      let query = 0;
      const nextQuery = () => demoQueries(1, 300, query++ % 40);

      const acts: Record<string, Act> = {
        "job-API submit": async () => {
          const res = await jobApi("POST", "/v1/jobs", { program: "blastn", db: DEMO_DB, query_fasta: nextQuery() });
          expect(res.status).toBe(202);
          ack.jobApiJobs.add(((await res.json()) as { job_id: string }).job_id);
        },
        "dashboard submit": async () => {
          const res = await dashboard(contributor, "POST", "/blast/jobs", {
            program: "blastn",
            db: DEMO_DB,
            query_fasta: nextQuery(),
          });
          expect(res.status).toBe(200);
          const body = (await res.json()) as { job_id: string; operation: { operation_id: string } };
          ack.dashboardJobs.set(body.job_id, body.operation.operation_id);
        },
        cancel: async () => {
          const res = await jobApi("POST", "/v1/jobs", {
            program: "blastn",
            db: DEMO_DB,
            query_fasta: demoQueries(3, 1500, query++ % 40),
          });
          expect(res.status).toBe(202);
          const { job_id } = (await res.json()) as { job_id: string };
          ack.jobApiJobs.add(job_id);
          const cancel = await jobApi("POST", `/v1/jobs/${job_id}/cancel`);
          expect(cancel.status).toBe(200);
          if (((await cancel.json()) as { status: string }).status === "cancelled") ack.cancelled.add(job_id);
        },
        "token regenerate": async () => {
          const res = await dashboard(owner, "POST", "/settings/api-token/regenerate");
          expect(res.status).toBe(200);
          ack.token = ((await res.json()) as { api_token: string }).api_token;
        },
        "workspace save": async (round) => {
          const nodeCount = round + 1;
          const body = {
            subscription_id: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
            resource_group: "rg-blast-power-cut",
            location: "westeurope",
            storage_account: "blaststore01",
            registry: "blastacr01",
            cluster_name: "aks-blast",
            node_size: "Standard_D4s_v5",
            node_count: nodeCount,
          };
          const res = await dashboard(
            contributor,
            "PUT",
            "/workspace",
            body,
            ack.workspace ? { "If-Match": ack.workspace.etag } : {},
          );
          expect(res.status).toBe(200);
          ack.workspace = { etag: ((await res.json()) as { etag: string }).etag, node_count: nodeCount };
        },
        "database add": async (round) => {
          const name = `pc_added_${round}`;
          const fasta = path.join(work, `${name}.fa`);
          writeFileSync(fasta, demoQueries(6, 800, round));
          const { stdout } = await promisify(execFile)(
            process.execPath,
            [path.join(ROOT, "bin/blastplane.mjs"), "db", "add", name, fasta],
            {
              cwd: ROOT,
              env: { ...process.env, BLASTPLANE_DATA_DIR: dataDir },
            },
          );
          const version = /version (\S+):/.exec(stdout)?.[1];
          expect(version).toBeDefined();
          ack.added.set(name, version as string);
        },
        "database prepare": async (round) => {
          const release = `2026-0${(round % 9) + 1}-01-00-00-${String(round).padStart(2, "0")}`;
          await ncbi?.publishRelease(release, [
            { name: PREPARED_DB, type: "nucl", fasta: demoQueries(12, 1200, round), volumes: 2 },
          ]);
          await ncbi?.setLatest(release);
          const res = await dashboard(contributor, "POST", `/databases/${PREPARED_DB}/prepare`);
          expect(res.status).toBe(200);
          ack.prepared.push({
            release,
            operationId: ((await res.json()) as { operation: { operation_id: string } }).operation.operation_id,
          });
        },
      };

      /** After a restart: everything acknowledged so far is there, and work in flight finishes. */
      async function verify(final: boolean): Promise<void> {
        for (const jobId of ack.jobApiJobs) {
          const res = await jobApi("GET", `/v1/jobs/${jobId}/status`);
          expect(res.status, `job ${jobId} lost`).toBe(200);
          await res.body?.cancel();
        }
        for (const [jobId, operationId] of ack.dashboardJobs) {
          const job = await dashboard(contributor, "GET", `/blast/jobs/${jobId}`);
          expect(job.status, `dashboard job ${jobId} lost`).toBe(200);
          await job.body?.cancel();
          const op = await dashboard(contributor, "GET", `/operations/${operationId}`);
          expect(op.status, `operation ${operationId} lost`).toBe(200);
          await op.body?.cancel();
        }
        if (ack.token) {
          expect(readApiToken(stack), "the regenerated API token was lost").toBe(ack.token);
          roundToken = ack.token;
          const res = await jobApi("GET", "/v1/databases");
          expect(res.status).toBe(200);
          await res.body?.cancel();
        }
        if (ack.workspace) {
          const res = await dashboard(contributor, "GET", "/workspace");
          expect(res.status).toBe(200);
          expect(await res.json()).toMatchObject({
            etag: ack.workspace.etag,
            workspace: { node_count: ack.workspace.node_count },
          });
        }
        const databases = (
          (await (await jobApi("GET", "/v1/databases")).json()) as { databases: { name: string; version: string }[] }
        ).databases;
        for (const [name, version] of ack.added)
          expect(databases, `database ${name} lost`).toContainEqual(expect.objectContaining({ name, version }));

        // Work in flight reaches an end; a job's terminal status never changes once seen.
        for (const jobId of ack.jobApiJobs) {
          const s = await eventually(
            async () => {
              const body = (await (await jobApi("GET", `/v1/jobs/${jobId}/status`)).json()) as { status: string };
              return TERMINAL_JOB.has(body.status) ? body.status : undefined;
            },
            120_000,
            250,
          );
          if (ack.cancelled.has(jobId)) expect(s, `cancelled job ${jobId}`).toBe("cancelled");
          expect(s, `job ${jobId} changed its terminal status`).toBe(ack.terminal.get(jobId) ?? s);
          ack.terminal.set(jobId, s);
        }
        for (const [jobId, operationId] of ack.dashboardJobs) {
          const op = await eventually(
            async () => {
              const body = (await (await dashboard(contributor, "GET", `/operations/${operationId}`)).json()) as {
                state: string;
              };
              return TERMINAL_OPERATION.has(body.state) ? body : undefined;
            },
            120_000,
            250,
          );
          expect(op.state, `dashboard submit ${operationId}: ${JSON.stringify(op)}`).toBe("succeeded");
          const s = await eventually(
            async () => {
              const body = (await (await dashboard(contributor, "GET", `/blast/jobs/${jobId}`)).json()) as {
                status: string;
              };
              return TERMINAL_JOB.has(body.status) ? body.status : undefined;
            },
            120_000,
            250,
          );
          expect(s, `dashboard job ${jobId}`).toBe("completed");
          expect(s).toBe(ack.terminal.get(jobId) ?? s);
          ack.terminal.set(jobId, s);
        }
        for (const { operationId } of ack.prepared) {
          const op = await eventually(
            async () => {
              const res = await dashboard(contributor, "GET", `/operations/${operationId}`);
              if (res.status !== 200) throw new Error(`prepare operation ${operationId} answered ${res.status}`);
              const body = (await res.json()) as { state: string };
              return TERMINAL_OPERATION.has(body.state) ? body : undefined;
            },
            120_000,
            250,
          );
          expect(op.state, `prepare ${operationId}: ${JSON.stringify(op)}`).toBe("succeeded");
        }
        if (final && ack.prepared.length > 0) {
          const latest = ack.prepared.at(-1)?.release;
          const listed = (
            (await (await jobApi("GET", "/v1/databases")).json()) as { databases: { name: string; version: string }[] }
          ).databases;
          expect(listed).toContainEqual(expect.objectContaining({ name: PREPARED_DB, version: latest }));
        }

        // Exactly once: the job API holds one job per acknowledged submit, no more (a replayed
        // dashboard submit reuses its idempotency key), and each dashboard job names its own.
        const all = (await (await jobApi("GET", "/v1/jobs?limit=500")).json()) as { jobs: { job_id: string }[] };
        const jobIds = new Set(all.jobs.map((j) => j.job_id));
        expect(jobIds.size).toBe(all.jobs.length);
        const viaDashboard = new Set<string>();
        for (const jobId of ack.dashboardJobs.keys()) {
          const view = (await (await dashboard(contributor, "GET", `/blast/jobs/${jobId}`)).json()) as {
            openapi_job_id: string;
          };
          expect(jobIds).toContain(view.openapi_job_id);
          viaDashboard.add(view.openapi_job_id);
        }
        expect(viaDashboard.size).toBe(ack.dashboardJobs.size);
        expect(jobIds.size).toBe(ack.jobApiJobs.size + ack.dashboardJobs.size);

        // No orchestration stuck: every instance the backend knows reaches a final state.
        await eventually(
          async () => {
            const res = await fetch(
              `${stack.info.durable_rpc_url}instances/?runtimeStatus=${RUNNING_ORCHESTRATION.join(",")}`,
            );
            expect(res.status).toBe(200);
            const running = (await res.json()) as { instanceId: string; name: string; runtimeStatus: string }[];
            return running.length === 0 && !res.headers.get("x-ms-continuation-token") ? true : undefined;
          },
          120_000,
          250,
        );
      }

      const names = Object.keys(acts);
      for (let round = 0; round < ROUNDS; round++) {
        // Every act once per round, in a random order; the cut follows the last acknowledgement
        // after a random 0-300 ms, so the earlier acts' work is caught at different stages.
        const order = names
          .map((n) => [rand(), n] as const)
          .sort((a, b) => a[0] - b[0])
          .map(([, n]) => n);
        for (const name of order) await (acts[name] as Act)(round);
        await new Promise((r) => setTimeout(r, Math.floor(rand() * 300)));
        await stack.cutPower();

        stack = await startStack({ dataDir, inMemory: false, detached: true, env });
        stacks.push(stack);
        contributor = await mintToken(stack, "Contributor");
        owner = await mintToken(stack, "Owner");
        await verify(round === ROUNDS - 1);
      }
    },
    240_000 + ROUNDS * 240_000,
  );
});
