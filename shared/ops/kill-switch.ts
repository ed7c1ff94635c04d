import { isStatus } from "../storage/table-text.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";

/** The global kill switch: when on, no action executes and A1 delivery stops (open requests are requeued). */
export interface KillSwitch {
  isOn(): Promise<boolean>;
  /** Whether it is on, and when and by whom it was last set (the time names one activation). */
  status(): Promise<KillSwitchStatus>;
  set(on: boolean, actorOid: string, now: Date): Promise<void>;
}

export interface KillSwitchStatus {
  on: boolean;
  set_at?: string;
  set_by?: string;
}

/** A change of the switch, as `onChange` hears it: only the writer that actually flipped it hears it. */
export interface KillSwitchChange {
  on: boolean;
  actor_oid: string;
  at: string;
}

export const OPS_FLAGS_TABLE = "opsflags";

/**
 * The kill switch in Table storage (table `opsflags`, row `kill_switch`); off until set. Setting
 * it to the state it is in changes nothing; a real flip is compare-and-swap on the row, so of two
 * hosts flipping it at once one flips and only that one calls `onChange` (the announcement).
 */
export function createKillSwitch(
  source: TableSource,
  options: {
    onChange?: (change: KillSwitchChange) => Promise<void>;
    onChangeError?: (error: unknown, change: KillSwitchChange) => void;
  } = {},
): KillSwitch {
  const table = tableOpener(source, OPS_FLAGS_TABLE);
  async function read(): Promise<{ status: KillSwitchStatus; etag?: string }> {
    try {
      const entity = await (await table()).getEntity<{ on?: boolean; set_at?: string; set_by?: string }>(
        "flags",
        "kill_switch",
      );
      return {
        status: {
          on: entity.on === true,
          ...(entity.set_at ? { set_at: entity.set_at } : {}),
          ...(entity.set_by ? { set_by: entity.set_by } : {}),
        },
        etag: entity.etag,
      };
    } catch (error) {
      if (isStatus(error, 404)) return { status: { on: false } };
      throw error;
    }
  }
  return {
    isOn: async () => (await read()).status.on,
    status: async () => (await read()).status,
    async set(on, actorOid, now) {
      for (;;) {
        const current = await read();
        if (current.status.on === on) return;
        const entity = {
          partitionKey: "flags",
          rowKey: "kill_switch",
          on,
          set_by: actorOid,
          set_at: now.toISOString(),
        };
        try {
          if (current.etag) await (await table()).updateEntity(entity, "Replace", { etag: current.etag });
          else await (await table()).createEntity(entity);
        } catch (error) {
          // Another host wrote first: read again and decide against what it wrote.
          if (isStatus(error, 412) || isStatus(error, 409)) continue;
          throw error;
        }
        const change = { on, actor_oid: actorOid, at: entity.set_at };
        try {
          await options.onChange?.(change);
        } catch (error) {
          // The switch has flipped and holds A1 delivery either way: a failed announcement must not
          // make the flip look failed to the caller (an executor would record a failed action).
          options.onChangeError?.(error, change);
        }
        return;
      }
    },
  };
}
