import { createReadStream } from "node:fs";
import { readdir } from "node:fs/promises";
import path from "node:path";

/** Options of {@link warmDatabaseFiles}. */
export interface WarmDatabaseFilesOptions {
  /** Aborting stops the reading. */
  abortSignal?: AbortSignal;
}

/**
 * Warms a database release for the local executor: reads every file once so the node's page cache
 * holds it (the node-local cache). Returns the bytes read. On the cluster, the Kubernetes
 * executor's warm-up copies the release to each node's local disk instead.
 */
export async function warmDatabaseFiles(releaseDir: string, options: WarmDatabaseFilesOptions = {}): Promise<number> {
  let bytes = 0;
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) await walk(full);
      else if (entry.isFile()) {
        for await (const chunk of createReadStream(full, { highWaterMark: 1024 * 1024, signal: options.abortSignal }))
          bytes += (chunk as Buffer).length;
      }
    }
  };
  await walk(releaseDir);
  return bytes;
}
