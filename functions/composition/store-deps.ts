/**
 * The stores the dashboard's and the cluster's compositions share (the database catalog, the
 * workspace) and the request scope they build services in. Its own module so that the cluster
 * composition (loaded on first use) and the dashboard's need not import each other.
 */
import os from "node:os";
import path from "node:path";
import { createFileDatabaseCatalog } from "../../shared/databases/database-catalog.js";
import {
  createTableDatabaseCatalog,
  openDatabaseStorage,
  type TableDatabaseCatalog,
} from "../../shared/databases/table-catalog.js";
import type { Logger } from "../../shared/logging/logger.js";
import type { OrchestrationClient } from "../../shared/orchestrations/orchestration-client.js";
import { createWorkspaceStore } from "../../shared/workspace/workspace.js";
import { createWorkspaceService, type WorkspaceService } from "../../shared/workspace/workspace-service.js";
import { appContext } from "./app-context.js";

/** What a request gives the services it builds: its durable client and its logger. */
export interface ServiceScope {
  durable: () => OrchestrationClient;
  logger: Logger;
}

let catalog: TableDatabaseCatalog | undefined;

/**
 * The database catalog in the workload storage account (shared with the job API), created on first
 * use. Databases found only in the `DATABASES_DIR` folder layout are published to it once.
 */
export function databaseCatalog(): TableDatabaseCatalog {
  const { config } = appContext;
  if (!catalog) {
    const { store, table, locationScheme } = openDatabaseStorage(config.storage);
    catalog = createTableDatabaseCatalog({
      store,
      table,
      locationScheme,
      cacheRoot: config.databasesDir ?? path.join(os.tmpdir(), "blastplane-databases"),
      importFrom: config.databasesDir ? createFileDatabaseCatalog(config.databasesDir) : undefined,
    });
  }
  return catalog;
}

let workspaces: WorkspaceService | undefined;

/** The workspace service, created on first use. */
export function workspaceService(): WorkspaceService {
  workspaces ??= createWorkspaceService({
    store: createWorkspaceStore(appContext.config.storage),
    audit: appContext.audit,
  });
  return workspaces;
}
