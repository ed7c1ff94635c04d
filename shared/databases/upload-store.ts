import { Readable } from "node:stream";
import type { ContainerClient } from "@azure/storage-blob";
import { openBlobContainer } from "../storage/blob-container.js";
import type { StorageTarget } from "../storage/storage-connection.js";

/** The Blob container where uploaded database FASTA files wait for their build. */
export const UPLOADS_CONTAINER = "database-uploads";

/** Uploaded FASTA files are staged in blocks of this size, two at a time: memory per upload stays near 8 MiB. */
const BLOCK_BYTES = 4 * 1024 * 1024;
const CONCURRENCY = 2;

const UPLOAD_NAME = /^op-[0-9a-f]{32}\.fa$/;

/** Where uploaded database FASTA files are kept between the upload route and the build activity. */
export interface DatabaseUploadStore {
  /**
   * Stores `source` as the upload `name` while it is read; the blob appears only when the source
   * has ended (a source that throws leaves nothing: its blocks are never committed).
   */
  write(name: string, source: AsyncIterable<Uint8Array>): Promise<void>;
  /** Copies the upload to a local file (for makeblastdb). */
  downloadToFile(name: string, file: string): Promise<void>;
  /** Removes the upload; absent is fine. */
  delete(name: string): Promise<void>;
  /** The stored uploads (committed blobs) and when each was stored, for the sweep of abandoned ones. */
  list(): Promise<{ name: string; lastModified: Date }[]>;
}

function checked(name: string): string {
  if (!UPLOAD_NAME.test(name)) throw new Error(`invalid upload name ${name}`);
  return name;
}

/** The upload store in the platform storage account (Azurite locally). No URL to a blob leaves it. */
export function createDatabaseUploadStore(storage: StorageTarget): DatabaseUploadStore {
  let opened: Promise<ContainerClient> | undefined;
  const container = () => {
    opened ??= openBlobContainer(storage, UPLOADS_CONTAINER).then(async (client) => {
      await client.createIfNotExists();
      return client;
    });
    // A failed open (storage down) is tried again on the next call.
    opened.catch(() => {
      opened = undefined;
    });
    return opened;
  };
  return {
    async write(name, source) {
      const client = (await container()).getBlockBlobClient(checked(name));
      let failure: unknown;
      const stream = Readable.from(
        (async function* () {
          try {
            for await (const chunk of source) yield Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
          } catch (error) {
            failure = error;
            throw error;
          }
        })(),
      );
      try {
        await client.uploadStream(stream, BLOCK_BYTES, CONCURRENCY, {
          blobHTTPHeaders: { blobContentType: "text/plain" },
        });
      } catch (error) {
        // The source's own refusal (a bad line, too large) is what the caller must see.
        throw failure ?? error;
      } finally {
        stream.destroy();
      }
      // A source that failed after its last chunk was read is still a failure: nothing stays stored.
      if (failure) {
        await client.deleteIfExists().catch(() => undefined);
        throw failure;
      }
    },
    async downloadToFile(name, file) {
      await (await container()).getBlockBlobClient(checked(name)).downloadToFile(file);
    },
    async delete(name) {
      await (await container()).getBlockBlobClient(checked(name)).deleteIfExists();
    },
    async list() {
      const stored: { name: string; lastModified: Date }[] = [];
      for await (const blob of (await container()).listBlobsFlat()) {
        // Only the store's own names: anything else in the container is not an upload to collect.
        if (UPLOAD_NAME.test(blob.name)) stored.push({ name: blob.name, lastModified: blob.properties.lastModified });
      }
      return stored;
    },
  };
}
