import { copyFileSync, readFileSync } from "node:fs";
import path from "node:path";
import { TableClient } from "@azure/data-tables";
import { BlobServiceClient, ContainerClient } from "@azure/storage-blob";
import type { ShardExecutor } from "../../jobapi/executors/executor.js";
import { ArtifactStore } from "../../jobapi/jobs/artifact-store.js";
import { JobDispatcher, type DispatcherOptions } from "../../jobapi/jobs/dispatcher.js";
import { JobStore } from "../../jobapi/jobs/job-store.js";
import type { DatabaseCatalog, DatabaseEntry } from "../../shared/databases/database-catalog.js";
import { newJobId } from "../../shared/jobs/model.js";
import { createLogger } from "../../shared/logging/logger.js";
import type { JobRecord } from "../../shared/jobs/model.js";
import { eventually, ROOT } from "./local-stack.js";

/** A Blob client of the account `blastplanework` at the (plain HTTP) fake `url`; the key is a placeholder. */
export const refusingBlobService = (url: string) =>
  BlobServiceClient.fromConnectionString(
    `DefaultEndpointsProtocol=http;AccountName=blastplanework;AccountKey=${Buffer.from("placeholder").toString("base64")};BlobEndpoint=${url}/blastplanework;`,
    { retryOptions: { maxTries: 1 } },
  );

/**
 * A job API dispatcher over Azurite (`storage`, tables and container of their own) whose shards
 * publish their own output, as the cluster's shard worker does, with a real Blob client to the
 * account at `refusingUrl` (a fake that refuses the identity). `finish` submits a job and waits
 * until it is completed or failed.
 */
export async function refusedShardDispatcher(
  storage: string,
  dir: string,
  refusingUrl: string,
  options: Pick<DispatcherOptions, "onRoleRefusal"> = {},
) {
  const prefix = `z${newJobId().slice(0, 6)}`;
  const jobs = new JobStore(
    TableClient.fromConnectionString(storage, `${prefix}jobs`, { allowInsecureConnection: true }),
    TableClient.fromConnectionString(storage, `${prefix}keys`, { allowInsecureConnection: true }),
  );
  const artifacts = new ArtifactStore(new ContainerClient(storage, `${prefix}artifacts`));
  await Promise.all([jobs.init(), artifacts.init()]);
  const manifest = {
    name: "demo",
    type: "nucl" as const,
    version: "2026-01-01-00-00-00",
    letters: 1000,
    sequences: 10,
    bytes: 1000,
    volumes: 1,
    bytes_to_cache: 1000,
    path: "full/demo",
    partitions: [],
    created_at: new Date().toISOString(),
  };
  const entry: DatabaseEntry = { manifest, root: dir, location: "local://databases/demo/2026-01-01-00-00-00" };
  const catalog: DatabaseCatalog = {
    list: async () => [entry],
    get: async () => entry,
    hold: async () => {},
    release: async () => {},
  };
  let attempts = 0;
  const executor: ShardExecutor = {
    name: "publishing-fixture",
    oneNode: true,
    storesOutputs: true,
    async run(spec) {
      attempts++;
      copyFileSync(path.join(ROOT, "local/demo/16s-rrna-demo.fasta"), spec.outputPath);
      const blob = refusingBlobService(refusingUrl)
        .getContainerClient("jobapi-artifacts")
        .getBlockBlobClient(`${spec.jobId}/shards/${spec.shardId}.out.gz`);
      await blob.uploadData(readFileSync(spec.outputPath));
    },
  };
  const dispatcher = new JobDispatcher({
    jobs,
    artifacts,
    catalog,
    executor,
    logger: createLogger({ level: "error", write: () => {} }),
    workDir: path.join(dir, "work"),
    maxActiveJobs: 1,
    nodeMemoryBytes: 64 * 1024 ** 3,
    memoryMarginBytes: 0,
    threadsPerShard: "auto",
    shardSlots: 1,
    shardAttempts: 3,
    pollIntervalMs: 50,
    ...options,
  });
  return {
    jobs,
    artifacts,
    dispatcher,
    /** Shard attempts run so far. */
    attempts: () => attempts,
    async finish(job: JobRecord): Promise<JobRecord> {
      await artifacts.putText(job.job_id, "query.fa", ">q1\nACGTACGTAC\n");
      await jobs.create(job);
      dispatcher.wake();
      return eventually(
        async () => {
          const j = await jobs.get(job.job_id);
          return j && ["completed", "failed"].includes(j.status) ? j : undefined;
        },
        30_000,
        50,
      );
    },
  };
}
