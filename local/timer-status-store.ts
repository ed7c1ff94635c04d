import { TableClient } from "@azure/data-tables";
import { storageClientOptions } from "../shared/storage/endpoints.js";
import type { TimerStatus, TimerStatusStore } from "./timer-scheduler.js";

/** Keeps timer schedule status in Table storage, like the Functions host's schedule monitor. */
export async function createTableTimerStatusStore(
  connectionString: string,
  taskHubName: string,
): Promise<TimerStatusStore> {
  const table = TableClient.fromConnectionString(
    connectionString,
    `${taskHubName}Timers`,
    storageClientOptions(connectionString),
  );
  await table.createTable();
  return {
    async get(functionName) {
      try {
        const e = await table.getEntity<Record<string, unknown>>("timer", functionName);
        return { last: String(e.last), next: String(e.next), lastUpdated: String(e.lastUpdated) };
      } catch (error) {
        if ((error as { statusCode?: number }).statusCode === 404) return undefined;
        throw error;
      }
    },
    async set(functionName, status: TimerStatus) {
      await table.upsertEntity({ partitionKey: "timer", rowKey: functionName, ...status }, "Replace");
    },
  };
}
