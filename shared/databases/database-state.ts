import { TableClient } from "@azure/data-tables";
import { isStatus } from "../storage/table-text.js";
import { storageClientOptions } from "../storage/endpoints.js";

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
    return new DatabaseStateStore(
      TableClient.fromConnectionString(connectionString, "databasestate", storageClientOptions(connectionString)),
    );
  }

  private init() {
    this.ready ??= this.table.createTable();
    return this.ready;
  }

  async get(name: string): Promise<DatabaseState> {
    return (await this.read(name)).state;
  }

  private async read(name: string): Promise<{ state: DatabaseState; etag: string | undefined }> {
    await this.init();
    try {
      const entity = await this.table.getEntity<Record<string, unknown>>("db", name);
      return {
        state: { ...EMPTY(name), ...(JSON.parse(String(entity.doc)) as Partial<DatabaseState>), name },
        etag: String(entity.etag),
      };
    } catch (error) {
      if (isStatus(error, 404)) return { state: EMPTY(name), etag: undefined };
      throw error;
    }
  }

  /**
   * Merges `change` into the stored state. Writers (warm-up, the update check) touch different
   * fields of the same row at overlapping times, so the write is conditional on the version read
   * and re-merged on a conflict: neither can put back what the other just changed.
   */
  async patch(name: string, change: Partial<DatabaseState>): Promise<DatabaseState> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const { state, etag } = await this.read(name);
      const next = { ...state, ...change, name };
      const entity = { partitionKey: "db", rowKey: name, doc: JSON.stringify(next) };
      try {
        if (etag === undefined) await this.table.createEntity(entity);
        else await this.table.updateEntity(entity, "Replace", { etag });
        return next;
      } catch (error) {
        // 409: created meanwhile; 412: changed meanwhile; 404: deleted meanwhile. Read again.
        if (!isStatus(error, 409) && !isStatus(error, 412) && !isStatus(error, 404)) throw error;
      }
    }
    throw new Error(`database ${name}: too many concurrent state updates`);
  }
}
