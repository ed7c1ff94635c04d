import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishDatabase } from "../../shared/databases/database-catalog.js";
import { demoQueries, jobApi, readApiToken } from "../support/jobapi-client.js";
import { eventually, mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { alive, childPids } from "../support/processes.js";

const run = promisify(execFile);
const DB = "demo3";
const DEMO_FASTA = path.join(ROOT, "local/demo/16s-rrna-demo.fasta");

/** Per query: each hit's accession, bit score and e-value, in order. */
function hitsByIteration(xml: string): string[][] {
  return xml
    .split("<Iteration>")
    .slice(1)
    .map((it) =>
      [
        ...it.matchAll(
          /<Hit_accession>([^<]*)<\/Hit_accession>[\s\S]*?<Hsp_bit-score>([^<]*)<\/Hsp_bit-score>[\s\S]*?<Hsp_evalue>([^<]*)<\/Hsp_evalue>/g,
        ),
      ].map((m) => `${m[1]} ${m[2]} ${m[3]}`),
    );
}

/** A stack whose shards run on the local Kubernetes API, with a 3-partition database. */
async function kubeStack(env: Record<string, string> = {}): Promise<TestStack> {
  const dataDir = mkdtempSync(path.join(tmpdir(), "bp-kube-stack-"));
  const databases = path.join(dataDir, "jobapi", "databases");
  mkdirSync(databases, { recursive: true });
  await publishDatabase(databases, { name: DB, fastaPath: DEMO_FASTA, type: "nucl", partitions: 3 });
  return startStack({
    dataDir,
    env: { BLASTPLANE_EXECUTOR: "kubernetes", BLASTPLANE_SKIP_DEMO_DB: "1", BLASTPLANE_KUBE_NODES: "3", ...env },
  });
}

describe("npm start with BLASTPLANE_EXECUTOR=kubernetes", () => {
  let stack: TestStack;
  let api: ReturnType<typeof jobApi>;
  let kubeconfig: string;
  const kubectl = async (...args: string[]) =>
    (await run("kubectl", ["--kubeconfig", kubeconfig, "-n", "blastplane", ...args])).stdout;
  const shardJobs = async (jobId: string) =>
    (
      await kubectl(
        "get",
        "jobs",
        "-l",
        `blastplane.io/job-id=${jobId}`,
        "-o",
        'jsonpath={range .items[*]}{.metadata.labels.blastplane\\.io/shard}{"\\n"}{end}',
      )
    )
      .split("\n")
      .filter(Boolean)
      .sort();

  beforeAll(async () => {
    stack = await kubeStack();
    api = jobApi(stack, readApiToken(stack));
    kubeconfig = String(
      (JSON.parse(readFileSync(path.join(stack.dataDir, "stack.json"), "utf8")) as { kubeconfig?: string }).kubeconfig,
    );
  });

  afterAll(async () => {
    await stack?.stop();
    stack?.cleanup();
  });

  it("B-148 a multi-query search partitioned 3 ways gives the unpartitioned search's hits, e-values and bit scores, and kubectl lists one Job per shard", async () => {
    expect(kubeconfig).toBe(path.join(stack.dataDir, "kubeconfig"));
    const query = demoQueries(4, 800, 3);
    const sharded = await api.submit({ program: "blastn", db: DB, query_fasta: query, execution_profile: "sharded" });
    const whole = await api.submit({ program: "blastn", db: DB, query_fasta: query });
    for (const id of [sharded.job_id, whole.job_id]) expect((await api.finished(id, 90_000)).status).toBe("completed");
    expect((await api.status(sharded.job_id)).kubernetes).toEqual({
      summary: { total: 3, succeeded: 3, failed: 0, active: 0 },
    });
    const xml = async (id: string) => (await api.get(`/v1/jobs/${id}/results?content=xml`)).text();
    const partitioned = hitsByIteration(await xml(sharded.job_id));
    expect(partitioned).toHaveLength(4);
    expect(partitioned.flat().length).toBeGreaterThan(10);
    expect(partitioned).toEqual(hitsByIteration(await xml(whole.job_id)));
    expect(await shardJobs(sharded.job_id)).toEqual(["b0-p1", "b0-p2", "b0-p3"]);
    expect(await shardJobs(whole.job_id)).toEqual(["b0"]);
    expect(await kubectl("get", "jobs,pods", "-l", `blastplane.io/job-id=${sharded.job_id}`)).toMatch(
      /job\.batch\/bp-\w+-b0-p1-a1\s+Complete\s+1\/1/,
    );
  });

  it("cancel leaves no Job or Pod of the job", async () => {
    const job = await api.submit({
      program: "tblastx",
      db: DB,
      query_fasta: demoQueries(4, 1500, 20),
      execution_profile: "sharded",
    });
    await eventually(
      async () =>
        (await kubectl("get", "pods", "-l", `blastplane.io/job-id=${job.job_id}`)).includes("Running")
          ? true
          : undefined,
      30_000,
      100,
    );
    const cancelled = await api.post(`/v1/jobs/${job.job_id}/cancel`, {});
    expect(cancelled.status).toBe(200);
    await eventually(
      async () => {
        const left = await run("kubectl", [
          "--kubeconfig",
          kubeconfig,
          "-n",
          "blastplane",
          "get",
          "jobs,pods",
          "-l",
          `blastplane.io/job-id=${job.job_id}`,
        ]);
        return `${left.stdout}${left.stderr}`.includes("No resources found") ? true : undefined;
      },
      30_000,
      200,
    );
    expect((await api.status(job.job_id)).status).toBe("cancelled");
  });

  it("B-006 B-016 the dashboard's warm-up fills every BLAST node through the job API and its operation reports each node's bytes", async () => {
    const token = await mintToken(stack, "Contributor");
    const dashboard = (method: string, p: string) =>
      fetch(`${stack.info.functions_url}/api${p}`, { method, headers: { Authorization: `Bearer ${token}` } });
    const started = await dashboard("POST", `/databases/${DB}/warmup`);
    expect(started.status).toBe(200);
    const { operation } = (await started.json()) as { operation: { operation_id: string; state: string } };
    // The call returns before the warm-up has finished: the operation is queued.
    expect(operation.state).toBe("queued");
    const done = await eventually(
      async () => {
        const o = (await (await dashboard("GET", `/operations/${operation.operation_id}`)).json()) as {
          state: string;
          progress?: { nodes: Record<string, unknown>[] };
        };
        return ["succeeded", "failed", "cancelled"].includes(o.state) ? o : undefined;
      },
      90_000,
      250,
    );
    expect(done.state).toBe("succeeded");
    const nodes = done.progress?.nodes ?? [];
    expect(nodes.map((n) => n.node)).toEqual(["local-blast-0", "local-blast-1", "local-blast-2"]);
    for (const n of nodes) {
      expect(n).toMatchObject({ state: "succeeded", bytes_done: n.bytes_total });
      expect(Number(n.bytes_total)).toBeGreaterThan(0);
    }
    const listed = (await (await dashboard("GET", "/databases")).json()) as {
      databases: { name: string; warm_state: string }[];
    };
    expect(listed.databases.find((d) => d.name === DB)?.warm_state).toBe("warm");
    // kubectl sees one warm-up Job per node, apart from the shard Jobs.
    const warmJobs = await kubectl(
      "get",
      "jobs",
      "-l",
      "app.kubernetes.io/managed-by=blastplane-warmup",
      "-o",
      'jsonpath={range .items[*]}{.spec.template.spec.nodeSelector.kubernetes\\.io/hostname}{"\\n"}{end}',
    );
    expect(warmJobs.split("\n").filter(Boolean).sort()).toEqual(["local-blast-0", "local-blast-1", "local-blast-2"]);
  });

  it("kill -9 of the job API mid-job, then a restart: the job completes and no shard has two Jobs", async () => {
    const job = await api.submit({
      program: "tblastx",
      db: DB,
      query_fasta: demoQueries(4, 1500, 30),
      execution_profile: "sharded",
    });
    await eventually(
      async () =>
        (await kubectl("get", "pods", "-l", `blastplane.io/job-id=${job.job_id}`)).includes("Running")
          ? true
          : undefined,
      30_000,
      100,
    );
    const jobApiPid = childPids(stack.info.pid).find((pid) =>
      readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("jobapi/server.js"),
    );
    expect(jobApiPid).toBeDefined();
    const restarts = stack.output().split("job API restarted").length;
    process.kill(Number(jobApiPid), "SIGKILL");
    await eventually(async () => (alive(Number(jobApiPid)) ? undefined : true));
    const before = await shardJobs(job.job_id);
    // The stack restarts it (supervision), on the same address and with the same settings.
    await eventually(
      async () => (stack.output().split("job API restarted").length > restarts ? true : undefined),
      60_000,
    );
    const again = jobApi(stack, readApiToken(stack));
    const done = await again.finished(job.job_id, 120_000);
    expect(done.status).toBe("completed");
    const after = await shardJobs(job.job_id);
    expect(after).toEqual(["b0-p1", "b0-p2", "b0-p3"]);
    expect(after).toEqual([...new Set(after)]);
    expect(before.length).toBeGreaterThan(0);
    expect(stack.output()).toContain("adopting the shard's cluster Job");
  });
});

describe("a shard over its memory limit on the cluster", () => {
  let stack: TestStack;

  beforeAll(async () => {
    stack = await kubeStack({ JOBAPI_K8S_WORKING_SET_BYTES: String(16 * 1024 ** 2) });
  });

  afterAll(async () => {
    await stack?.stop();
    stack?.cleanup();
  });

  it("B-246 fails the sharded job with the OOMKilled message and the remedies that apply to it", async () => {
    const api = jobApi(stack, readApiToken(stack));
    const job = await api.submit({
      program: "blastn",
      db: DB,
      query_fasta: demoQueries(1),
      execution_profile: "sharded",
    });
    const failed = await api.finished(job.job_id, 60_000);
    expect(failed.status).toBe("failed");
    expect(String(failed.error)).toMatch(
      /failed after 1 attempt\(s\): cluster Job bp-\w+-b0-p\d-a1: OOMKilled — the shard's pod used more than its memory limit/,
    );
    // B-246: the job already ran sharded, so the sharded execution profile is no remedy.
    expect(String(failed.error)).not.toContain("sharded execution profile");
    expect(String(failed.error)).toContain("larger machine type");
    expect(String(failed.error)).toContain("smaller database");
  });
});
