import { isStatus } from "../storage/table-text.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";

/** The global kill switch: when on, no action executes and A1 delivery stops (open requests are requeued). */
export interface KillSwitch {
  isOn(): Promise<boolean>;
  set(on: boolean, actorOid: string, now: Date): Promise<void>;
}

export const OPS_FLAGS_TABLE = "opsflags";

/** The kill switch in Table storage (table `opsflags`, row `kill_switch`); off until set. */
export function createKillSwitch(source: TableSource): KillSwitch {
  const table = tableOpener(source, OPS_FLAGS_TABLE);
  return {
    async isOn() {
      try {
        const entity = await (await table()).getEntity<{ on?: boolean }>("flags", "kill_switch");
        return entity.on === true;
      } catch (error) {
        if (isStatus(error, 404)) return false;
        throw error;
      }
    },
    async set(on, actorOid, now) {
      await (await table()).upsertEntity({ partitionKey: "flags", rowKey: "kill_switch", on, set_by: actorOid, set_at: now.toISOString() }, "Replace");
    },
  };
}
