import type { Readable } from "node:stream";
import { BlobServiceClient, type ContainerClient } from "@azure/storage-blob";
import { isStatus } from "../storage/table-text.js";

/** Artifact names inside a job's folder; nothing outside these shapes is ever read or written. */
const ARTIFACT_NAME = /^(query\.fa|merged_results\.out\.gz|shards\/b\d{1,5}(-p\d{1,3})?\.out\.gz)$/;

/**
 * Queries and results in Blob storage, under `<job_id>/`. Bytes only ever leave through the job
 * API's own streams: no URL to a blob is produced anywhere.
 */
export class ArtifactStore {
  constructor(private readonly container: ContainerClient) {}

  static fromConnectionString(connectionString: string, containerName = "jobapi-artifacts"): ArtifactStore {
    // Fail over quickly when storage is down (the route answers 503); transient blips still retry.
    const client = BlobServiceClient.fromConnectionString(connectionString, { retryOptions: { maxTries: 3, retryDelayInMs: 200, maxRetryDelayInMs: 1000 } });
    return new ArtifactStore(client.getContainerClient(containerName));
  }

  async init(): Promise<void> {
    await this.container.createIfNotExists();
  }

  private blob(jobId: string, name: string) {
    if (!ARTIFACT_NAME.test(name)) throw new Error(`invalid artifact name ${name}`);
    return this.container.getBlockBlobClient(`${jobId}/${name}`);
  }

  async putText(jobId: string, name: string, text: string): Promise<void> {
    const data = Buffer.from(text);
    await this.blob(jobId, name).upload(data, data.length);
  }

  async getText(jobId: string, name: string): Promise<string> {
    return (await this.blob(jobId, name).downloadToBuffer()).toString("utf8");
  }

  async uploadFile(jobId: string, name: string, path: string): Promise<number> {
    const client = this.blob(jobId, name);
    await client.uploadFile(path);
    return (await client.getProperties()).contentLength ?? 0;
  }

  async downloadToFile(jobId: string, name: string, path: string): Promise<void> {
    await this.blob(jobId, name).downloadToFile(path);
  }

  async exists(jobId: string, name: string): Promise<boolean> {
    return this.blob(jobId, name).exists();
  }

  async size(jobId: string, name: string): Promise<number | undefined> {
    try {
      return (await this.blob(jobId, name).getProperties()).contentLength ?? 0;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** A stream of the artifact's bytes (undefined when it does not exist). */
  async open(jobId: string, name: string, abortSignal?: AbortSignal): Promise<Readable | undefined> {
    try {
      const res = await this.blob(jobId, name).download(0, undefined, { abortSignal });
      return res.readableStreamBody as Readable | undefined;
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async deleteJob(jobId: string): Promise<void> {
    for await (const item of this.container.listBlobsFlat({ prefix: `${jobId}/` })) {
      await this.container.deleteBlob(item.name).catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
    }
  }

  async ping(): Promise<void> {
    await this.container.getProperties();
  }
}
