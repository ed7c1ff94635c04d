import { randomUUID } from "node:crypto";
import { z } from "zod";
import {
  dayPartitionKey,
  newestFirstFilter,
  newestFirstRowKey,
  type TableSource,
  tableOpener,
} from "../../storage/table-source.js";

/** One measured language-model call, as the narrators record it. */
export interface UsageRecord {
  at: string;
  model: string;
  /** `operator_chat`, `presentation`, `clarification`, … */
  workload_scope: string;
  mode: string;
  input_tokens: number;
  output_tokens: number;
}

const usageSchema = z.strictObject({
  model: z.string().min(1).max(100),
  workload_scope: z.string().min(1).max(100),
  mode: z.string().min(1).max(50),
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
});

/** The usage ledger (table `llmusage`): real and empty until a narrator writes to it. */
export interface UsageLedger {
  record(usage: Omit<UsageRecord, "at">): Promise<UsageRecord>;
  /** Records since `since`, newest first, at most `limit`. */
  list(since: Date, limit: number): Promise<UsageRecord[]>;
}

export const USAGE_TABLE = "llmusage";

export function createUsageLedger(source: TableSource, options: { now?: () => Date } = {}): UsageLedger {
  const table = tableOpener(source, USAGE_TABLE);
  const now = options.now ?? (() => new Date());
  return {
    async record(usage) {
      const valid = usageSchema.parse(usage);
      const at = now();
      const record: UsageRecord = { ...valid, at: at.toISOString() };
      await (await table()).createEntity({
        partitionKey: dayPartitionKey(at),
        rowKey: newestFirstRowKey(at, randomUUID()),
        ...record,
      });
      return record;
    },
    async list(since, limit) {
      const out: UsageRecord[] = [];
      for await (const e of (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: newestFirstFilter(since) },
      })) {
        out.push({
          at: String(e.at),
          model: String(e.model),
          workload_scope: String(e.workload_scope),
          mode: String(e.mode),
          input_tokens: Number(e.input_tokens),
          output_tokens: Number(e.output_tokens),
        });
        if (out.length >= limit) break;
      }
      return out;
    },
  };
}
