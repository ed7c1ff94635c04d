/**
 * Kill loop: SIGKILL the whole local stack, or only the job API, at random points of a
 * submit → run → merge → download cycle, `KILL_LOOP_ROUNDS` times (2 in `npm test`), and after
 * each restart check that every accepted job reaches one terminal state, none is duplicated (a
 * client retrying its in-flight submits with their idempotency keys gets the same job), and no
 * result is lost or corrupt (the merged XML is well-formed and its hits equal an undisturbed run's).
 */
import { XMLValidator } from "fast-xml-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { prng } from "../support/helpers.js";
import { DEMO_DB, demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, startStack, type TestStack } from "../support/local-stack.js";
import { alive, childPids, jobApiPidOf } from "../support/processes.js";

const ROUNDS = Math.max(1, Number(process.env.KILL_LOOP_ROUNDS ?? 2));
const SEED = Number(process.env.KILL_LOOP_SEED ?? 20261126);
const ENV = { JOBAPI_MAX_ACTIVE_JOBS: "2", BLASTPLANE_RESTART_BACKOFF_MS: "100" };
/** Two partitions, several queries: each job runs shards and merges them. */
const SEARCH = { program: "blastn", db: DEMO_DB, query_fasta: demoQueries(6, 500, 30), execution_profile: "sharded" };
const POINTS = ["while submitting", "while running", "after completing", "while downloading"] as const;

let stack: TestStack;
let dataDir: string;
let referenceHits: string[][];
let kills = 0;

function hitsByIteration(xml: string): string[][] {
  return xml
    .split("<Iteration>")
    .slice(1)
    .map((it) =>
      [...it.matchAll(/<Hit_accession>([^<]*)<\/Hit_accession>[\s\S]*?<Hsp_bit-score>([^<]*)<\/Hsp_bit-score>/g)].map(
        (m) => `${m[1]} ${m[2]}`,
      ),
    );
}

function jobApiPid(): number | undefined {
  return jobApiPidOf(stack.info.pid);
}

function api() {
  return jobApi(stack, readApiToken(stack));
}

/**
 * Submits with an idempotency key as a client would: a 503 (the key's first submit, killed after
 * claiming it, is "still being stored" until the claim lapses) is retried after its Retry-After.
 * Undefined when the connection dies with the kill.
 */
async function submitKeyed(key: string): Promise<string | undefined> {
  try {
    for (;;) {
      const res = await api().post("/v1/jobs", { ...SEARCH, idempotency_key: key });
      if (res.status === 503) {
        const wait = Number(res.headers.get("retry-after"));
        await res.arrayBuffer();
        expect(wait, "a 503 says when to retry").toBeGreaterThan(0);
        await new Promise((r) => setTimeout(r, wait * 1000));
        continue;
      }
      if (res.status !== 202 && res.status !== 200)
        throw new Error(`submit answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { job_id: string }).job_id;
    }
  } catch (error) {
    if (error instanceof TypeError) return undefined; // fetch failed: the service was killed under it
    throw error;
  }
}

async function killJobApi(): Promise<void> {
  const pid = jobApiPid();
  expect(pid).toBeDefined();
  const restarts = stack.output().split("job API restarted").length;
  process.kill(pid as number, "SIGKILL");
  kills += 1;
  await eventually(
    async () => (stack.output().split("job API restarted").length > restarts ? true : undefined),
    60_000,
  );
}

async function killStack(): Promise<void> {
  const children = childPids(stack.info.pid);
  await stack.kill();
  kills += 1;
  // Its children (Azurite, the job API) end with it; the next stack starts once they have.
  await eventually(async () => (children.every((pid) => !alive(pid)) ? true : undefined), 30_000, 50);
  stack = await startStack({ dataDir, inMemory: false, env: ENV });
}

beforeAll(async () => {
  stack = await startStack({ inMemory: false, env: ENV });
  dataDir = stack.dataDir;
  // The undisturbed run every result is compared with.
  const client = api();
  const { job_id } = await client.submit(SEARCH);
  expect((await client.finished(job_id, 120_000)).status).toBe("completed");
  const xml = await (await client.get(`/v1/jobs/${job_id}/results?content=xml`)).text();
  referenceHits = hitsByIteration(xml);
  expect(referenceHits).toHaveLength(6);
}, 240_000);

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe("kill loop", () => {
  it("B-143 B-142 B-102 every accepted job ends once, none duplicated, none lost or corrupt, through SIGKILLs of the stack and of the job API", async () => {
    const random = prng(SEED);
    const keys: string[] = [];
    const accepted = new Map<string, string>();
    for (let round = 0; round < ROUNDS; round++) {
      const target = random() < 0.5 ? "job API" : "stack";
      const point = POINTS[Math.floor(random() * POINTS.length)] as (typeof POINTS)[number];
      const roundKeys = [`kill-${SEED}-${round}-a`, `kill-${SEED}-${round}-b`];
      keys.push(...roundKeys);
      const kill = target === "stack" ? killStack : killJobApi;
      if (point === "while submitting") {
        // The kill races the submits: some may never be answered.
        const submits = roundKeys.map((key) => submitKeyed(key));
        await kill();
        for (const [i, id] of (await Promise.all(submits)).entries()) if (id) accepted.set(roundKeys[i] as string, id);
      } else {
        for (const key of roundKeys) accepted.set(key, (await submitKeyed(key)) as string);
        const first = accepted.get(roundKeys[0] as string) as string;
        if (point === "while running") {
          await eventually(
            async () =>
              ["running", "completed"].includes(String((await api().status(first)).status)) ? true : undefined,
            120_000,
            50,
          );
        } else {
          await api().finished(first, 120_000);
        }
        if (point === "while downloading") {
          const res = await api().get(`/v1/jobs/${first}/results?content=full`);
          const reader = res.body?.getReader();
          await reader?.read();
          await kill();
          await reader?.cancel().catch(() => {});
        } else {
          await kill();
        }
      }
      // A client retries what it had in flight, with the same keys: the same job, never a second one.
      for (const key of roundKeys) {
        const id = await submitKeyed(key);
        expect(id).toBeDefined();
        if (accepted.has(key)) expect(id, `${key} after a kill ${point} of the ${target}`).toBe(accepted.get(key));
        accepted.set(key, id as string);
      }
      process.stdout.write(`kill loop round ${round + 1}/${ROUNDS}: killed the ${target} ${point}\n`);
    }

    const client = api();
    for (const [key, id] of accepted) {
      const done = await client.finished(id, 180_000);
      expect(done.status, `${key} (${id}): ${String(done.error ?? "")}`).toBe("completed");
      const xml = await (await client.get(`/v1/jobs/${id}/results?content=xml`)).text();
      expect(XMLValidator.validate(xml), `${key} (${id})`).toBe(true);
      expect(hitsByIteration(xml), `${key} (${id})`).toEqual(referenceHits);
    }
    // Exactly one job per key (plus the reference run), each terminal once and staying so.
    const listed = (
      (await (await client.get("/v1/jobs?limit=500")).json()) as { jobs: { job_id: string; status: string }[] }
    ).jobs;
    expect(listed).toHaveLength(keys.length + 1);
    expect(new Set(listed.map((j) => j.job_id)).size).toBe(listed.length);
    for (const id of accepted.values()) expect(listed.find((j) => j.job_id === id)?.status).toBe("completed");
    process.stdout.write(`kill loop: ${kills} kills, ${accepted.size} jobs, 0 lost\n`);
  }, 1_800_000);
});
