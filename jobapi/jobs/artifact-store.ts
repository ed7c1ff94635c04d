import { createHash, randomBytes } from "node:crypto";
import { PassThrough, type Readable, type Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { BlockBlobClient, ContainerClient } from "@azure/storage-blob";
import { openBlobServiceClient } from "../../shared/storage/blob-service.js";
import type { StorageTarget } from "../../shared/storage/storage-connection.js";
import { isStatus } from "../../shared/storage/table-text.js";

/** The merged result of a job: gzipped BLAST XML. */
export const MERGED_ARTIFACT = "merged_results.out.gz";

/** The merged result's index (gzipped JSON, `ResultIndex`): per query, its byte range in the XML. */
export const RESULT_INDEX_ARTIFACT = "merged_index.json.gz";

/** Where a shard's gzipped BLAST XML is kept. */
export function shardArtifact(shardId: string): string {
  return `shards/${shardId}.out.gz`;
}

/** Artifact names inside a job's folder; nothing outside these shapes is ever read or written. */
const ARTIFACT_NAME =
  /^(query\.fa|merged_results\.out\.gz|merged_index\.json\.gz|shards\/b\d{1,5}(-p\d{1,3})?\.out\.gz|batches\/b\d{1,5}\.fa)$/;

/** Streamed artifacts up to this size are sent in one Put Blob request. */
const SINGLE_PUT_BYTES = 8 * 1024 * 1024;
/** Larger ones are staged in blocks of this size, this many at once, then committed; memory per
 * upload stays near (concurrency + 1) blocks. */
const UPLOAD_BLOCK_BYTES = 8 * 1024 * 1024;
const UPLOAD_CONCURRENCY = 2;

/**
 * Sends a stream to a block blob. A stream that ends within {@link SINGLE_PUT_BYTES} goes in one
 * Put Blob (one request; the SDK's uploadStream always stages blocks and commits, which costs a
 * small result two extra round trips); a longer one is staged in blocks as it arrives, at most
 * {@link UPLOAD_CONCURRENCY} at once, and committed at the end. Memory stays bounded either way.
 */
async function uploadChunks(
  client: BlockBlobClient,
  stream: AsyncIterable<Buffer>,
  abortSignal?: AbortSignal,
  write: WriteOptions = {},
): Promise<number> {
  // Only when the blob does not exist yet: a second writer fails with 409/412 instead of replacing it.
  const conditions = write.ifNew ? { ifNoneMatch: "*" } : undefined;
  const whole = write.checksum ? createHash("md5") : undefined;
  const md5 = (data: Buffer) => (write.checksum ? new Uint8Array(createHash("md5").update(data).digest()) : undefined);
  let held: Buffer[] = [];
  let heldBytes = 0;
  let total = 0;
  const blockIds: string[] = [];
  // Block ids of their own per upload: two uploads of one blob (a shard rerun by another process
  // after a takeover, a retried job) never commit each other's blocks. All ids of a blob are of
  // one length, as the service requires.
  const uploadId = randomBytes(9).toString("hex");
  const staging = new Set<Promise<void>>();
  const stage = async (data: Buffer) => {
    const id = Buffer.from(`${uploadId}-${String(blockIds.length).padStart(6, "0")}`).toString("base64");
    blockIds.push(id);
    // Storage checks each block against its MD5 on receipt.
    const staged = client
      .stageBlock(id, data, data.length, { abortSignal, transactionalContentMD5: md5(data) })
      .then(() => {
        staging.delete(staged);
      });
    // A failed block stays in the set and surfaces through race/all below, never as unhandled.
    staged.catch(() => {});
    staging.add(staged);
    if (staging.size >= UPLOAD_CONCURRENCY) await Promise.race(staging);
  };
  for await (const chunk of stream) {
    whole?.update(chunk);
    held.push(chunk);
    heldBytes += chunk.length;
    total += chunk.length;
    if ((blockIds.length === 0 && heldBytes <= SINGLE_PUT_BYTES) || heldBytes < UPLOAD_BLOCK_BYTES) continue;
    const all = Buffer.concat(held, heldBytes);
    let offset = 0;
    for (; all.length - offset >= UPLOAD_BLOCK_BYTES; offset += UPLOAD_BLOCK_BYTES)
      await stage(all.subarray(offset, offset + UPLOAD_BLOCK_BYTES));
    held = [all.subarray(offset)];
    heldBytes = all.length - offset;
  }
  if (blockIds.length === 0) {
    const data = Buffer.concat(held, heldBytes);
    const headers = whole ? { blobContentMD5: new Uint8Array(whole.digest()) } : undefined;
    await client.upload(data, data.length, {
      abortSignal,
      conditions,
      metadata: write.metadata,
      blobHTTPHeaders: headers,
      transactionalContentMD5: md5(data),
    });
    return total;
  }
  if (heldBytes > 0) await stage(Buffer.concat(held, heldBytes));
  await Promise.all(staging);
  // The blob's Content-MD5 covers it whole, so any reader can check what it got.
  await client.commitBlockList(blockIds, {
    abortSignal,
    conditions,
    metadata: write.metadata,
    blobHTTPHeaders: whole ? { blobContentMD5: new Uint8Array(whole.digest()) } : undefined,
  });
  return total;
}

/** How {@link ArtifactStore.uploadStream} writes. */
export interface WriteOptions {
  /** Fail (409/412) rather than replace an artifact that exists: a retried shard never publishes twice. */
  ifNew?: boolean;
  /** MD5 of every block, verified by storage on receipt, and of the whole blob as its Content-MD5. */
  checksum?: boolean;
  /** Blob metadata stored with it (in the same request that makes the blob appear). */
  metadata?: Record<string, string>;
}

/**
 * Queries and results in Blob storage, under `<job_id>/`. Bytes only ever leave through the job
 * API's own streams: no URL to a blob is produced anywhere.
 */
export class ArtifactStore {
  constructor(private readonly container: ContainerClient) {}

  /** The store in `storage` (an Azurite connection string, or the job API's storage connection). */
  static fromConnectionString(storage: StorageTarget, containerName = "jobapi-artifacts"): ArtifactStore {
    // Fail over quickly when storage is down (the route answers 503); transient blips still retry.
    const client = openBlobServiceClient(storage, {
      retryOptions: { maxTries: 3, retryDelayInMs: 200, maxRetryDelayInMs: 1000 },
    });
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

  /** Stores `data` as the artifact in one request (replacing it). */
  async putBytes(jobId: string, name: string, data: Buffer, abortSignal?: AbortSignal): Promise<void> {
    await this.blob(jobId, name).upload(data, data.length, { abortSignal });
  }

  /** The artifact's bytes (one GET), or undefined when it does not exist. */
  async getBytes(jobId: string, name: string, abortSignal?: AbortSignal): Promise<Buffer | undefined> {
    return this.readRange(jobId, name, 0, undefined, abortSignal);
  }

  /**
   * `count` bytes of the artifact from `offset` (one ranged GET; fewer at its end), or undefined
   * when it does not exist.
   */
  async readRange(
    jobId: string,
    name: string,
    offset: number,
    count: number | undefined,
    abortSignal?: AbortSignal,
  ): Promise<Buffer | undefined> {
    try {
      const res = await this.blob(jobId, name).download(offset, count, { abortSignal });
      const chunks: Buffer[] = [];
      if (res.readableStreamBody) for await (const chunk of res.readableStreamBody) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async getText(jobId: string, name: string): Promise<string> {
    // One GET: downloadToBuffer would first ask for the blob's size (a second round trip).
    const body = (await this.blob(jobId, name).download(0)).readableStreamBody;
    const chunks: Buffer[] = [];
    if (body) for await (const chunk of body) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString("utf8");
  }

  async uploadFile(jobId: string, name: string, path: string): Promise<number> {
    const client = this.blob(jobId, name);
    await client.uploadFile(path);
    return (await client.getProperties()).contentLength ?? 0;
  }

  /**
   * Uploads `source`, passed through `options.through` (e.g. a gzip), as the artifact while it is
   * still being produced; the blob appears (or is replaced) only when the stream has ended.
   * Aborting `options.signal` stops it. Returns its size in bytes. See {@link uploadChunks}.
   */
  async uploadStream(
    jobId: string,
    name: string,
    source: Readable,
    options: { through?: Transform; signal?: AbortSignal } & WriteOptions = {},
  ): Promise<number> {
    const { signal } = options;
    signal?.throwIfAborted();
    const client = this.blob(jobId, name);
    const last = new PassThrough({ highWaterMark: 1024 * 1024 });
    // pipeline destroys every stream on a failure, so the upload sees it; a failed upload destroys
    // the streams in turn, so the writer never waits for a drain that cannot come.
    const fed = pipeline(options.through ? [source, options.through, last] : [source, last]);
    const onAbort = () => last.destroy(signal?.reason instanceof Error ? signal.reason : new Error("upload aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    const upload = uploadChunks(client, last, signal, options).catch((error: unknown) => {
      last.destroy(error as Error);
      throw error;
    });
    try {
      // Both settle before returning, so on failure every stream is already destroyed. The upload
      // carries the cause: its own failure, or the source's error that reached it through `last`.
      const [uploaded, streamed] = await Promise.allSettled([upload, fed]);
      if (uploaded.status === "rejected") throw uploaded.reason;
      if (streamed.status === "rejected") throw streamed.reason;
      return uploaded.value;
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
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

  /** The artifact's size and metadata (one request), or undefined when it does not exist. */
  async properties(
    jobId: string,
    name: string,
  ): Promise<{ bytes: number; metadata: Record<string, string> } | undefined> {
    try {
      const props = await this.blob(jobId, name).getProperties();
      return { bytes: props.contentLength ?? 0, metadata: props.metadata ?? {} };
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
