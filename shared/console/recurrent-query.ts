import { createHash } from "node:crypto";
import { normalizeObjectId } from "../auth/object-id.js";
import { odata } from "@azure/data-tables";
import type { Caller } from "../auth/roles.js";
import type { Logger } from "../logging/logger.js";
import type { EventLog } from "../ops/events.js";
import { isStatus } from "../storage/table-text.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";

/** Where each (shape, principal) pair's last call is kept: one partition per shape. */
export const RECURRENT_QUERY_TABLE = "recurrentqueries";
export const RECURRENT_QUERY_EVENT = "console.recurrent_query";
/** Spec §8: N defaults to 5 per week. */
export const RECURRENT_QUERY_DEFAULTS = { threshold: 5, windowSeconds: 7 * 86_400 } as const;

/** The kind of an argument's value: what a shape keeps of it (never the value). */
function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/**
 * A tool call's argument SHAPE: the tool and its argument names with their value kinds, never the
 * values (`query_audit{actor:string,limit:number}`). Calls that differ only in values share it.
 */
export function argumentShape(
  tool: string,
  args: unknown,
): { text: string; id: string; kinds: Record<string, string> } {
  const record =
    args !== null && typeof args === "object" && !Array.isArray(args) ? (args as Record<string, unknown>) : {};
  const kinds = Object.fromEntries(
    Object.keys(record)
      .sort()
      .map((name) => [name, kindOf(record[name])]),
  );
  const text = `${tool}{${Object.entries(kinds)
    .map(([name, kind]) => `${name}:${kind}`)
    .join(",")}}`;
  return { text, id: createHash("sha256").update(text, "utf8").digest("hex").slice(0, 32), kinds };
}

export interface RecurrentQueryWatch {
  /** Counts one invoked tool call; publishes the event when its shape just reached the threshold. Never throws. */
  observe(tool: string, args: unknown, caller: Caller, at: Date): Promise<void>;
}

/**
 * The `console.recurrent_query` signal (spec §6 item 2, §8): when one tool-argument shape is invoked
 * by `threshold` distinct principals within the rolling `windowSeconds`, one event goes into the
 * event stream for the discovery loop (observation-first: `shadow`). Repeats by one principal count
 * once. Per shape and window one event: the shape's row remembers when it was last published (no
 * new event while that is within the window), and the key names the window-long bucket it fell in,
 * so two hosts crossing the threshold together record one. Principals are kept as digests.
 */
export function createRecurrentQueryWatch(deps: {
  tables: TableSource;
  events: Pick<EventLog, "record">;
  logger: Pick<Logger, "warn">;
  threshold: number;
  windowSeconds: number;
}): RecurrentQueryWatch {
  const table = tableOpener(deps.tables, RECURRENT_QUERY_TABLE);
  const windowMs = deps.windowSeconds * 1000;
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");
  return {
    async observe(tool, args, caller, at) {
      try {
        const shape = argumentShape(tool, args);
        const client = await table();
        await client.upsertEntity(
          { partitionKey: shape.id, rowKey: `p_${digest(normalizeObjectId(caller.oid))}`, last_at: at.toISOString() },
          "Replace",
        );
        const since = new Date(at.getTime() - windowMs).toISOString();
        let principals = 0;
        for await (const _ of client.listEntities({
          queryOptions: {
            filter: odata`PartitionKey eq ${shape.id} and RowKey ge 'p_' and RowKey lt 'p\`' and last_at ge ${since}`,
            select: ["RowKey"],
          },
        }))
          principals++;
        if (principals < deps.threshold) return;
        let published: string | undefined;
        try {
          published = (await client.getEntity<{ published_at: string }>(shape.id, "published")).published_at;
        } catch (error) {
          if (!isStatus(error, 404)) throw error;
        }
        if (published !== undefined && published >= since) return;
        const bucket = Math.floor(at.getTime() / windowMs);
        await deps.events.record({
          idempotency_key: `${RECURRENT_QUERY_EVENT}/${shape.id}/${bucket}`,
          source: "console.coordinator",
          event_type: RECURRENT_QUERY_EVENT,
          detected_at: at,
          mode: "shadow",
          correlation_id: shape.id,
          resource_ref: `console_tool/${tool}`,
          payload: {
            tool,
            shape: shape.text,
            argument_kinds: shape.kinds,
            distinct_principals: principals,
            threshold: deps.threshold,
            window_seconds: deps.windowSeconds,
          },
        });
        await client.upsertEntity(
          { partitionKey: shape.id, rowKey: "published", published_at: at.toISOString() },
          "Replace",
        );
      } catch (error) {
        // The signal is advisory: it never fails the caller's turn.
        deps.logger.warn("recurrent query not counted", {
          tool,
          error: error instanceof Error ? error.message.split("\n")[0] : String(error),
        });
      }
    },
  };
}
