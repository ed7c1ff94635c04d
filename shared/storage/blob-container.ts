import type { ContainerClient } from "@azure/storage-blob";
import type { StorageTarget } from "./storage-connection.js";

/**
 * A Blob container client, with the Blob SDK loaded on first use: the dashboard needs it only once
 * a search is submitted or read, and loading it with the app costs ~45 ms of every cold start
 * (measured with `npm run bench`, metric d).
 */
export async function openBlobContainer(storage: StorageTarget, containerName: string): Promise<ContainerClient> {
  const { openBlobServiceClient } = await import("./blob-service.js");
  return openBlobServiceClient(storage).getContainerClient(containerName);
}
