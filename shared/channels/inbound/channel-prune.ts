import { odata } from "@azure/data-tables";
import { pruneClosedIds } from "../../storage/durable-queue.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import { CHANNEL_REPLAY_TABLE } from "../platform-b/slack-inbound.js";
import { WEBHOOK_NONCE_TABLE } from "../webhooks/typed-webhook.js";
import { CHANNEL_TURNS_TABLE } from "./channel-queue.js";

/**
 * Pruning of the inbound channels' guard rows (issue 26), run by the `channelPruneTimer`:
 *
 * - `channelreplay`: a used Slack signature is kept until its `expires_at` (twice the five-minute
 *   signature window); past it, a replay fails the timestamp check anyway.
 * - `channelwebhooknonces`: a used `webhook-id` likewise until its `expires_at` (twice the Standard
 *   Webhooks tolerance). Each source's high-water timestamp row stays.
 * - `channelturns`, the id rows (the dedupe of vendor deliveries): only turns that are closed
 *   (`done`, `abandoned`) and older than {@link TURN_DEDUPE_RETENTION_MS}, well past any vendor's
 *   redelivery (Slack retries within minutes, Bot Service within seconds). Turns still queued,
 *   processing or delivering keep their row: it guards the crash path.
 *
 * Each run deletes at most `limit` rows per table, so a backlog drains over several runs.
 */

/** How long a closed turn's dedupe row is kept. */
export const TURN_DEDUPE_RETENTION_MS = 24 * 60 * 60 * 1000;
const DEFAULT_LIMIT = 1000;

export interface PruneCounts {
  replay: number;
  nonces: number;
  turns: number;
}

export async function pruneChannelRows(options: {
  tables: TableSource;
  now: Date;
  limit?: number;
}): Promise<PruneCounts> {
  const limit = options.limit ?? DEFAULT_LIMIT;
  const now = options.now.toISOString();
  const cutoff = new Date(options.now.getTime() - TURN_DEDUPE_RETENTION_MS).toISOString();

  async function prune(tableName: string, filter: string): Promise<number> {
    const table = await tableOpener(options.tables, tableName)();
    const doomed: { partitionKey: string; rowKey: string }[] = [];
    for await (const row of table.listEntities({ queryOptions: { filter, select: ["PartitionKey", "RowKey"] } })) {
      doomed.push({ partitionKey: String(row.partitionKey), rowKey: String(row.rowKey) });
      if (doomed.length >= limit) break;
    }
    let deleted = 0;
    for (const row of doomed) {
      try {
        await table.deleteEntity(row.partitionKey, row.rowKey);
        deleted++;
      } catch (error) {
        // Another host pruned it first.
        if (!isStatus(error, 404)) throw error;
      }
    }
    return deleted;
  }

  return {
    replay: await prune(CHANNEL_REPLAY_TABLE, odata`expires_at lt ${now}`),
    nonces: await prune(WEBHOOK_NONCE_TABLE, odata`expires_at lt ${now}`),
    turns: await pruneClosedIds({
      tables: options.tables,
      table: CHANNEL_TURNS_TABLE,
      cutoff: new Date(cutoff),
      limit,
    }),
  };
}
