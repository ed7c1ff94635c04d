import { odata, type TableClient } from "@azure/data-tables";
import { openTableClient, type StorageConnection } from "./storage-connection.js";

/**
 * Table plumbing shared by the append-only stores (audit, events, workspace): where a table lives,
 * creating it once, and keys that list newest first.
 */

/** Opens a table client by table name (tests and callers with their own credentials pass one). */
export type TableClientFactory = (tableName: string) => TableClient;

/** Where a store's table lives: an Azurite connection string, the deployable's storage connection, or a factory of table clients. */
export type TableSource = string | StorageConnection | TableClientFactory;

/**
 * Returns a getter for the table `tableName` that creates the table on first use (once per
 * process; a failed creation is retried on the next call).
 */
export function tableOpener(source: TableSource, tableName: string): () => Promise<TableClient> {
  const client = typeof source === "function" ? source(tableName) : openTableClient(source, tableName);
  let ready: Promise<TableClient> | undefined;
  return () => {
    ready ??= client.createTable().then(
      () => client,
      (error: unknown) => {
        ready = undefined;
        throw error;
      },
    );
    return ready;
  };
}

const DAY_MS = 86_400_000;
/** Inverted keys count down from these, so ascending key order is newest first (until year ~4700 for days). */
const MAX_DAY = 999_999;
const MAX_MS = 999_999_999_999_999;

/**
 * The partition of the day `at` falls in (UTC): `<inverted day number>_<YYYY-MM-DD>`, so newer days
 * sort first and the date stays readable in Storage Explorer.
 */
export function dayPartitionKey(at: Date): string {
  const day = Math.floor(at.getTime() / DAY_MS);
  return `${String(MAX_DAY - day).padStart(6, "0")}_${at.toISOString().slice(0, 10)}`;
}

/** A row key that sorts newest first (inverted milliseconds), made unique by `id`. */
export function newestFirstRowKey(at: Date, id: string): string {
  return `${String(MAX_MS - at.getTime()).padStart(15, "0")}_${id}`;
}

/**
 * The OData filter selecting day partitions (keys starting with a digit, so other partitions of the
 * same table are excluded) and, with `since`, only rows at or after it.
 */
export function newestFirstFilter(since?: Date): string {
  if (!since) return "PartitionKey ge '0' and PartitionKey lt ':'";
  // '~' sorts after every id character, so rows at exactly `since` are included.
  return odata`PartitionKey ge '0' and PartitionKey le ${dayPartitionKey(since)} and RowKey le ${newestFirstRowKey(since, "~")}`;
}

/** Validates a list `limit`: 1 to 1000, 100 when absent. */
export function listLimit(limit: number | undefined): number {
  const value = limit ?? 100;
  if (!Number.isInteger(value) || value < 1 || value > 1000)
    throw new RangeError("limit must be an integer from 1 to 1000");
  return value;
}
