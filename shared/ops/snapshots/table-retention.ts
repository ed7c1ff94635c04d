import { odata, type TableClient } from "@azure/data-tables";
import { newestFirstRowKey } from "../../storage/table-source.js";

/** At most this many rows go per call, so a write never turns into a long sweep; the next call takes the rest. */
const PRUNE_BATCH = 50;

/**
 * Deletes rows of `partition` older than `cutoff` from a table keyed newest first
 * (`newestFirstRowKey`), at most a batch per call.
 */
export async function pruneOlderThan(client: TableClient, partition: string, cutoff: Date): Promise<number> {
  // Newest first: every row older than the cutoff has a larger key than the cutoff's.
  const from = newestFirstRowKey(cutoff, "~");
  let pruned = 0;
  for await (const row of client.listEntities({
    queryOptions: { filter: odata`PartitionKey eq ${partition} and RowKey gt ${from}`, select: ["RowKey"] },
  })) {
    await client.deleteEntity(partition, String(row.rowKey));
    if (++pruned >= PRUNE_BATCH) break;
  }
  return pruned;
}
