import type { ContainerClient } from "@azure/storage-blob";

/**
 * A Blob container client, with the Blob SDK loaded on first use: the dashboard needs it only once
 * a search is submitted or read, and loading it with the app costs ~45 ms of every cold start
 * (measured with `npm run bench`, metric d).
 */
export async function openBlobContainer(connectionString: string, containerName: string): Promise<ContainerClient> {
  const { BlobServiceClient } = await import("@azure/storage-blob");
  return BlobServiceClient.fromConnectionString(connectionString).getContainerClient(containerName);
}
