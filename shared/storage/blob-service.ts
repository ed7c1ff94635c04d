import { BlobServiceClient, type StoragePipelineOptions } from "@azure/storage-blob";
import { azureCredential } from "../auth/azure-credential.js";
import { azuriteConnectionString, blobUrlOf, type StorageTarget } from "./storage-connection.js";

/**
 * A Blob service client: Azurite by connection string, or the account's Blob URL with the managed
 * identity. Kept apart from `storage-connection.ts` so that the Blob SDK loads only where blobs
 * are used (`blob-container.ts` imports this module on first use).
 */
export function openBlobServiceClient(target: StorageTarget, options?: StoragePipelineOptions): BlobServiceClient {
  if (typeof target === "string" || target.kind === "connection-string") {
    return BlobServiceClient.fromConnectionString(
      azuriteConnectionString(typeof target === "string" ? target : target.connectionString),
      options,
    );
  }
  return new BlobServiceClient(blobUrlOf(target), azureCredential(target.clientId), options);
}
