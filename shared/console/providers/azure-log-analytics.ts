import type { TokenCredential } from "@azure/identity";
import type { LogsQueryClient, LogsQueryClientOptions } from "@azure/monitor-query-logs";
import { ToolError } from "../tools/tool.js";
import type { LogProvider } from "./providers.js";

/**
 * `query_log`'s provider over one Log Analytics workspace with the Azure Monitor Logs SDK, loaded
 * on first use (the Functions bundle's cold start does not pay for it). A partial or failed result
 * is `unavailable`, never a part presented as the whole.
 */
export function createLogAnalyticsProvider(options: {
  workspaceId: string;
  credential: TokenCredential;
  clientOptions?: LogsQueryClientOptions;
}): LogProvider {
  let client: Promise<LogsQueryClient> | undefined;
  return {
    workspace: options.workspaceId,
    async query(kql, window) {
      client ??= import("@azure/monitor-query-logs").then(
        ({ LogsQueryClient }) => new LogsQueryClient(options.credential, options.clientOptions),
      );
      const { LogsQueryResultStatus } = await import("@azure/monitor-query-logs");
      const result = await (await client).queryWorkspace(options.workspaceId, kql, {
        startTime: window.start,
        endTime: window.end,
      });
      if (result.status !== LogsQueryResultStatus.Success)
        throw new ToolError("unavailable", "the log workspace returned a partial result");
      return {
        tables: result.tables.map((t) => ({
          name: t.name,
          columns: t.columnDescriptors.map((c) => c.name ?? ""),
          rows: t.rows.map((row) => row.map((cell) => (cell instanceof Date ? cell.toISOString() : cell))),
        })),
      };
    },
  };
}
