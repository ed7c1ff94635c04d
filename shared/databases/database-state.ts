import { TableClient } from "@azure/data-tables";
import { isStatus } from "../storage/table-text.js";

/** What the dashboard tracks about a database beyond its manifest: warm-up and update checks. */
export interface DatabaseState {
  name: string;
  warm_state: "cold" | "warming" | "warm" | "failed";
  warmed_version: string | null;
  warmed_at: string | null;
  update_available: boolean;
  latest_release: string | null;
  checked_at: string | null;
}

const EMPTY = (name: string): DatabaseState => ({
  name,
  warm_state: "cold",
  warmed_version: null,
  warmed_at: null,
  update_available: false,
  latest_release: null,
  checked_at: null,
});

/** Database state in Table storage (table `databasestate`, one row per database). */
export class DatabaseStateStore {
  private ready: Promise<unknown> | undefined;
  constructor(private readonly table: TableClient) {}

  static fromConnectionString(connectionString: string): DatabaseStateStore {
    return new DatabaseStateStore(TableClient.fromConnectionString(connectionString, "databasestate", { allowInsecureConnection: true }));
  }

  private init() {
    this.ready ??= this.table.createTable();
    return this.ready;
  }

  async get(name: string): Promise<DatabaseState> {
    await this.init();
    try {
      const e = await this.table.getEntity<Record<string, unknown>>("db", name);
      return { ...EMPTY(name), ...(JSON.parse(String(e.doc)) as Partial<DatabaseState>), name };
    } catch (error) {
      if (isStatus(error, 404)) return EMPTY(name);
      throw error;
    }
  }

  /** Merges `change` into the stored state (last writer wins; each field has one writer). */
  async patch(name: string, change: Partial<DatabaseState>): Promise<DatabaseState> {
    const next = { ...(await this.get(name)), ...change, name };
    await this.table.upsertEntity({ partitionKey: "db", rowKey: name, doc: JSON.stringify(next) }, "Replace");
    return next;
  }
}
