import { randomUUID } from "node:crypto";
import { odata } from "@azure/data-tables";
import { newestFirstRowKey, type TableSource, tableOpener } from "../../storage/table-source.js";
import { packText, unpackText } from "../../storage/table-text.js";
import { pruneOlderThan } from "./table-retention.js";

/** The server-owned snapshots the console's read-as-stored tools answer from. */
export const SNAPSHOT_KINDS = ["detection_readiness", "t2_recovery", "configuration_baseline"] as const;
export type SnapshotKind = (typeof SNAPSHOT_KINDS)[number];

export const SNAPSHOTS_TABLE = "opssnapshots";

/** Snapshots older than this are pruned when a newer one of the same kind is recorded. */
const RETENTION_MS = 7 * 86_400_000;

/** One immutable, versioned snapshot: its envelope and the producer's body as it was stored. */
export interface StoredSnapshot {
  snapshot_id: string;
  kind: SnapshotKind;
  observed_at: string;
  producer: string;
  schema_version: number;
  body: Record<string, unknown>;
}

export interface SnapshotStore {
  /** Records a new snapshot (never overwrites one) and returns it as stored. */
  record(
    kind: SnapshotKind,
    snapshot: { producer: string; schema_version: number; observed_at: Date; body: Record<string, unknown> },
  ): Promise<StoredSnapshot>;
  /** The newest snapshot of `kind`, read as stored; undefined when none was ever recorded. */
  latest(kind: SnapshotKind): Promise<StoredSnapshot | undefined>;
  /** A tool's provider over one kind: the newest snapshot, envelope fields beside the body's; older than `maxAgeMs` is stale. */
  reader(
    kind: SnapshotKind,
    options?: { maxAgeMs?: number },
  ): { latest(): Promise<Record<string, unknown> | undefined>; maxAgeMs?: number };
}

/**
 * The snapshot store (table `opssnapshots`): one partition per kind, rows keyed newest first and
 * created, never updated, so a snapshot once read is the snapshot forever. The body is JSON split
 * across properties (table-text) so a large readiness or baseline body still fits one row.
 */
export function createSnapshotStore(source: TableSource, options: { now?: () => Date } = {}): SnapshotStore {
  const table = tableOpener(source, SNAPSHOTS_TABLE);
  const now = options.now ?? (() => new Date());

  const store: SnapshotStore = {
    async record(kind, snapshot) {
      const snapshot_id = `${kind}-${snapshot.observed_at.getTime().toString(36)}-${randomUUID().slice(0, 8)}`;
      const stored: StoredSnapshot = {
        snapshot_id,
        kind,
        observed_at: snapshot.observed_at.toISOString(),
        producer: snapshot.producer,
        schema_version: snapshot.schema_version,
        body: snapshot.body,
      };
      await (await table()).createEntity({
        partitionKey: kind,
        rowKey: newestFirstRowKey(snapshot.observed_at, snapshot_id),
        snapshot_id,
        observed_at: stored.observed_at,
        producer: stored.producer,
        schema_version: stored.schema_version,
        ...packText("body", JSON.stringify(stored.body)),
      });
      await pruneOlderThan(await table(), kind, new Date(now().getTime() - RETENTION_MS));
      return stored;
    },
    async latest(kind) {
      for await (const e of (await table()).listEntities<Record<string, unknown>>({
        queryOptions: { filter: odata`PartitionKey eq ${kind}` },
      })) {
        return {
          snapshot_id: String(e.snapshot_id),
          kind,
          observed_at: String(e.observed_at),
          producer: String(e.producer),
          schema_version: Number(e.schema_version),
          body: JSON.parse(unpackText(e, "body")) as Record<string, unknown>,
        };
      }
      return undefined;
    },
    reader(kind, options = {}) {
      return {
        ...(options.maxAgeMs !== undefined ? { maxAgeMs: options.maxAgeMs } : {}),
        async latest() {
          const snapshot = await store.latest(kind);
          if (!snapshot) return undefined;
          const { body, ...envelope } = snapshot;
          // The envelope wins over a body field of the same name: provenance cannot be overwritten.
          return { ...body, ...envelope };
        },
      };
    },
  };
  return store;
}
