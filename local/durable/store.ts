import { TableClient, TableServiceClient, odata } from "@azure/data-tables";
import { randomUUID } from "node:crypto";
import { isStatus, packText, unpackText } from "../../shared/storage/table-text.js";
import { storageClientOptions } from "../../shared/storage/endpoints.js";

/** Runtime statuses as Durable Functions reports them. */
export type RuntimeStatus =
  | "Pending"
  | "Running"
  | "Completed"
  | "ContinuedAsNew"
  | "Failed"
  | "Terminated"
  | "Suspended";

export const TERMINAL_STATUSES: ReadonlySet<RuntimeStatus> = new Set(["Completed", "Failed", "Terminated"]);

/** A history event in the wire shape the library replays (`EventType`, `EventId`, `Timestamp`, …). */
export interface HistoryEvent {
  EventType: number;
  EventId: number;
  IsPlayed: boolean;
  Timestamp: string;
  [key: string]: unknown;
}

export interface InstanceRecord {
  instanceId: string;
  name: string;
  status: RuntimeStatus;
  /** JSON text of the input, output and custom status ("null" when none). */
  input: string;
  output: string;
  customStatus: string;
  createdTime: string;
  lastUpdatedTime: string;
  historyLength: number;
  parentInstanceId: string;
  parentTaskId: number;
  /** Changes on continue-as-new, so messages meant for an earlier execution are dropped. */
  executionId: string;
  /** Inbox message ids already applied to history (so a crash between writes never applies one twice). */
  appliedMessages: string[];
}

export interface InboxMessage {
  id: string;
  event: HistoryEvent;
}

function historyRowKey(index: number): string {
  return `h${String(index).padStart(10, "0")}`;
}

const INBOX_PREFIX = "m";

/**
 * Persistence of the local durable backend in Table storage (Azurite locally): one row per
 * instance, one row per history event, and an inbox of messages (completions, timer firings,
 * raised events) not yet applied by an episode.
 */
export class DurableStore {
  private readonly instances: TableClient;
  private readonly history: TableClient;

  constructor(
    private readonly service: TableServiceClient,
    createTableClient: (table: string) => TableClient,
    taskHubName: string,
  ) {
    this.instances = createTableClient(`${taskHubName}Instances`);
    this.history = createTableClient(`${taskHubName}History`);
  }

  static fromConnectionString(connectionString: string, taskHubName: string): DurableStore {
    const service = TableServiceClient.fromConnectionString(connectionString, storageClientOptions(connectionString));
    return new DurableStore(
      service,
      (table) => TableClient.fromConnectionString(connectionString, table, storageClientOptions(connectionString)),
      taskHubName,
    );
  }

  async init(): Promise<void> {
    await this.instances.createTable();
    await this.history.createTable();
  }

  /** Answers whether storage can be reached (readiness). */
  async ping(): Promise<void> {
    await this.service.getProperties();
  }

  private toRecord(e: Record<string, unknown>): InstanceRecord {
    return {
      instanceId: String(e.rowKey),
      name: String(e.name),
      status: String(e.status) as RuntimeStatus,
      input: unpackText(e, "input") || "null",
      output: unpackText(e, "output") || "null",
      customStatus: unpackText(e, "customStatus") || "null",
      createdTime: String(e.createdTime),
      lastUpdatedTime: String(e.lastUpdatedTime),
      historyLength: Number(e.historyLength ?? 0),
      parentInstanceId: String(e.parentInstanceId ?? ""),
      parentTaskId: Number(e.parentTaskId ?? -1),
      executionId: String(e.executionId ?? ""),
      appliedMessages: JSON.parse(unpackText(e, "applied") || "[]") as string[],
    };
  }

  async getInstance(instanceId: string): Promise<InstanceRecord | undefined> {
    try {
      const e = await this.instances.getEntity<Record<string, unknown>>("i", instanceId);
      return this.toRecord(e);
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async putInstance(record: InstanceRecord): Promise<void> {
    await this.instances.upsertEntity(
      {
        partitionKey: "i",
        rowKey: record.instanceId,
        name: record.name,
        status: record.status,
        createdTime: record.createdTime,
        lastUpdatedTime: record.lastUpdatedTime,
        historyLength: record.historyLength,
        parentInstanceId: record.parentInstanceId,
        parentTaskId: record.parentTaskId,
        executionId: record.executionId,
        ...packText("input", record.input),
        ...packText("output", record.output),
        ...packText("customStatus", record.customStatus),
        // Only the recent ids matter: older messages were deleted after they were applied.
        ...packText("applied", JSON.stringify(record.appliedMessages.slice(-200))),
      },
      "Replace",
    );
  }

  async *listInstances(
    filter: { statuses?: RuntimeStatus[]; createdFrom?: Date; createdTo?: Date } = {},
  ): AsyncIterable<InstanceRecord> {
    const clauses = [odata`PartitionKey eq ${"i"}`];
    if (filter.statuses && filter.statuses.length > 0) {
      clauses.push(`(${filter.statuses.map((s) => odata`status eq ${s}`).join(" or ")})`);
    }
    if (filter.createdFrom) clauses.push(odata`createdTime ge ${filter.createdFrom.toISOString()}`);
    if (filter.createdTo) clauses.push(odata`createdTime le ${filter.createdTo.toISOString()}`);
    for await (const e of this.instances.listEntities<Record<string, unknown>>({
      queryOptions: { filter: clauses.join(" and ") },
    })) {
      yield this.toRecord(e);
    }
  }

  async getHistory(instance: InstanceRecord): Promise<HistoryEvent[]> {
    const events: HistoryEvent[] = [];
    const filter = odata`PartitionKey eq ${instance.instanceId} and RowKey ge ${"h"} and RowKey lt ${historyRowKey(instance.historyLength)}`;
    for await (const e of this.history.listEntities<Record<string, unknown>>({ queryOptions: { filter } })) {
      events.push(JSON.parse(unpackText(e, "event")) as HistoryEvent);
    }
    return events;
  }

  /** Writes history rows from `fromIndex` on; the instance row's `historyLength` makes them visible. */
  async appendHistory(instanceId: string, fromIndex: number, events: HistoryEvent[]): Promise<void> {
    for (let start = 0; start < events.length; start += 50) {
      const batch = events.slice(start, start + 50).map(
        (event, i) =>
          [
            "upsert",
            {
              partitionKey: instanceId,
              rowKey: historyRowKey(fromIndex + start + i),
              ...packText("event", JSON.stringify(event)),
            },
            "Replace",
          ] as const,
      );
      await this.history.submitTransaction(batch.map((b) => [...b]) as Parameters<TableClient["submitTransaction"]>[0]);
    }
  }

  async enqueue(instanceId: string, event: HistoryEvent): Promise<string> {
    const id = `${INBOX_PREFIX}${Date.now().toString().padStart(15, "0")}-${randomUUID()}`;
    await this.history.createEntity({
      partitionKey: instanceId,
      rowKey: id,
      ...packText("event", JSON.stringify(event)),
    });
    return id;
  }

  async getInbox(instanceId: string): Promise<InboxMessage[]> {
    const out: InboxMessage[] = [];
    const filter = odata`PartitionKey eq ${instanceId} and RowKey ge ${INBOX_PREFIX} and RowKey lt ${"n"}`;
    for await (const e of this.history.listEntities<Record<string, unknown>>({ queryOptions: { filter } })) {
      out.push({ id: String(e.rowKey), event: JSON.parse(unpackText(e, "event")) as HistoryEvent });
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  async deleteInbox(instanceId: string, ids: string[]): Promise<void> {
    for (const id of ids) {
      await this.history.deleteEntity(instanceId, id).catch((error: unknown) => {
        if (!isStatus(error, 404)) throw error;
      });
    }
  }

  /** Instances with inbox messages, for recovery after a restart. */
  async *instancesWithInbox(): AsyncIterable<string> {
    const seen = new Set<string>();
    const filter = odata`RowKey ge ${INBOX_PREFIX} and RowKey lt ${"n"}`;
    for await (const e of this.history.listEntities({ queryOptions: { filter, select: ["PartitionKey"] } })) {
      const id = String(e.partitionKey);
      if (!seen.has(id)) {
        seen.add(id);
        yield id;
      }
    }
  }

  async purge(instanceId: string): Promise<boolean> {
    const existing = await this.getInstance(instanceId);
    if (!existing) return false;
    const keys: string[] = [];
    for await (const e of this.history.listEntities({
      queryOptions: { filter: odata`PartitionKey eq ${instanceId}`, select: ["RowKey"] },
    })) {
      keys.push(String(e.rowKey));
    }
    for (const key of keys) await this.history.deleteEntity(instanceId, key).catch(() => undefined);
    await this.instances.deleteEntity("i", instanceId);
    return true;
  }
}
