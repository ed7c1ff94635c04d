import { randomUUID } from "node:crypto";
import os from "node:os";
import type { TableClient } from "@azure/data-tables";
import type { Logger } from "../../shared/logging/logger.js";
import { openTableClient, type StorageTarget } from "../../shared/storage/storage-connection.js";
import { isStatus } from "../../shared/storage/table-text.js";
import { processAlive } from "../../shared/process-alive.js";
import { DEFAULT_FLEET } from "../../shared/jobs/model.js";

const PARTITION = "lease";
/** The lease row of the default fleet (the only row before fleets existed). */
const ROW = "dispatch";

/** The lease row of a dispatch fleet: each fleet's job APIs compete for their own lease only. */
export function leaseRowOf(fleet: string): string {
  return fleet === DEFAULT_FLEET ? ROW : `${ROW}-${fleet}`;
}

export interface DispatchLeaseOptions {
  /** The table holding the lease row (one row per dispatch fleet on the storage account). */
  table: TableClient;
  /** The fleet whose lease this is (default {@link DEFAULT_FLEET}: the row `dispatch`). */
  fleet?: string;
  /**
   * How long a holder that stops renewing keeps the lease, as others see it. The holder renews
   * every quarter of it and stops dispatching on its own after two thirds without a renewal, so it
   * has stopped before anyone else can take over.
   */
  leaseDurationMs: number;
  logger: Logger;
  /** A monotonic clock in ms (default `performance.now`); tests drive it. */
  now?: () => number;
  /** This process, as the lease row names it (defaults: this host and pid). */
  host?: string;
  pid?: number;
}

export interface LeaseEvents {
  /** This process now holds the lease: it may dispatch. */
  acquired(): void;
  /** This process no longer holds the lease (taken over, or not renewed in time): stop dispatching at once. */
  lost(): void;
}

/** The lease row; `write_id` names the write that produced it, so a retried write can recognise its own. */
interface LeaseRow {
  holder: string;
  host: string;
  pid: number;
  write_id: string;
  acquired_at: string;
  renewed_at: string;
}

/**
 * The dispatch lease: among the job-API processes sharing a storage account (replicas, or two
 * processes on one data folder), only the holder runs jobs. The lease is one Table row written with
 * ETag compare-and-swap. The holder renews it; another process takes it over when it has seen the
 * same ETag for a whole lease duration on its own clock (no clock comparison between machines), or
 * at once when the row names a process on this host that is gone. The holder fences itself: once
 * two thirds of the duration pass without a renewal it reports the lease lost, before any other
 * process could take it.
 */
export class DispatchLease {
  /** This process's identity in the lease row. */
  readonly instanceId = randomUUID();
  /** Its fleet's lease row. */
  private readonly rowKey: string;
  private readonly now: () => number;
  private readonly host: string;
  private readonly pid: number;
  /** The ETag of the row this process last wrote as holder; undefined while not holding. */
  private etag: string | undefined;
  /** Monotonic time until which the lease counts as held here. */
  private heldUntil = 0;
  /** The other holder's row version as first seen, and when. */
  private observed: { etag: string; at: number } | undefined;
  private events: LeaseEvents | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private reported = false;
  /** When this process's current tenure began (ISO), kept in the row for operators. */
  private acquiredAt = "";

  constructor(private readonly o: DispatchLeaseOptions) {
    this.now = o.now ?? (() => performance.now());
    this.rowKey = leaseRowOf(o.fleet ?? DEFAULT_FLEET);
    this.host = o.host ?? os.hostname();
    this.pid = o.pid ?? process.pid;
  }

  /** The lease in `storage` (an Azurite connection string, or the job API's storage connection). */
  static fromConnectionString(
    storage: StorageTarget,
    options: Omit<DispatchLeaseOptions, "table">,
    tableName = "jobapileases",
  ): DispatchLease {
    const table = openTableClient(storage, tableName, {
      retryOptions: { maxRetries: 2, retryDelayInMs: 200, maxRetryDelayInMs: 1000 },
    });
    return new DispatchLease({ ...options, table });
  }

  async init(): Promise<void> {
    await this.o.table.createTable();
  }

  /** Whether this process may dispatch now. Checked before every write a dispatch makes. */
  isHeld(): boolean {
    return this.etag !== undefined && this.now() < this.heldUntil;
  }

  /**
   * Starts competing for (and renewing) the lease; `events` tell the dispatcher when to run.
   * Resolves after the first round (which acquires the lease when nobody holds it).
   */
  start(events: LeaseEvents): Promise<void> {
    this.events = events;
    const intervalMs = Math.max(50, Math.floor(this.o.leaseDurationMs / 4));
    this.timer = setInterval(() => void this.tick(), intervalMs);
    this.timer.unref();
    return this.tick();
  }

  /** Stops competing; a held lease is given up at once, so another process need not wait for it. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
    const etag = this.etag;
    this.setLost();
    if (etag === undefined) return;
    await this.o.table.deleteEntity(PARTITION, this.rowKey, { etag }).catch((error: unknown) => {
      if (!isStatus(error, 404) && !isStatus(error, 412))
        this.o.logger.warn("could not give up the dispatch lease", { error });
    });
  }

  /** One round: renew (holder) or try to acquire; one at a time. */
  tick(): Promise<void> {
    this.running ??= this.round().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async round(): Promise<void> {
    try {
      if (this.etag !== undefined) await this.renew();
      else await this.acquire();
    } catch (error) {
      this.o.logger.warn("dispatch lease round failed", { error, holding: this.etag !== undefined });
    }
    // Not renewed in time (storage unreachable, or this process was paused): stop dispatching.
    if (this.etag !== undefined && !this.isHeld()) {
      this.o.logger.warn("dispatch lease expired before it could be renewed; dispatch stops", {
        instance: this.instanceId,
      });
      this.report(false);
    }
  }

  private row(writeId: string, acquiredAt: string): LeaseRow {
    return {
      holder: this.instanceId,
      host: this.host,
      pid: this.pid,
      write_id: writeId,
      acquired_at: acquiredAt,
      renewed_at: new Date().toISOString(),
    };
  }

  private async read(): Promise<(LeaseRow & { etag: string }) | undefined> {
    try {
      const e = await this.o.table.getEntity<LeaseRow>(PARTITION, this.rowKey);
      return {
        holder: e.holder,
        host: e.host,
        pid: Number(e.pid),
        write_id: e.write_id,
        acquired_at: e.acquired_at,
        renewed_at: e.renewed_at,
        etag: String(e.etag),
      };
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /**
   * A write refused with 409/412 may be this process's own write, landed on an attempt whose
   * answer was lost and then retried by the SDK: the stored row says (its `write_id`).
   */
  private async ownWrite(writeId: string): Promise<string | undefined> {
    const stored = await this.read();
    return stored?.write_id === writeId ? stored.etag : undefined;
  }

  private async renew(): Promise<void> {
    const sentAt = this.now();
    const writeId = randomUUID();
    const previous = this.etag as string;
    let etag: string | undefined;
    try {
      etag = (
        await this.o.table.updateEntity(
          { partitionKey: PARTITION, rowKey: this.rowKey, ...this.row(writeId, this.acquiredAt) },
          "Replace",
          { etag: previous },
        )
      ).etag;
    } catch (error) {
      if (!isStatus(error, 412) && !isStatus(error, 404)) throw error;
      etag = await this.ownWrite(writeId);
      if (etag === undefined) {
        this.o.logger.warn("dispatch lease taken over by another process; dispatch stops", {
          instance: this.instanceId,
        });
        this.setLost();
        this.report(false);
        return;
      }
    }
    this.hold(etag as string, sentAt);
  }

  private async acquire(): Promise<void> {
    const sentAt = this.now();
    const current = await this.read();
    const writeId = randomUUID();
    const acquiredAt = new Date().toISOString();
    if (!current) {
      try {
        const created = await this.o.table.createEntity({
          partitionKey: PARTITION,
          rowKey: this.rowKey,
          ...this.row(writeId, acquiredAt),
        });
        return this.hold(created.etag as string, sentAt, acquiredAt);
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const own = await this.ownWrite(writeId);
        if (own !== undefined) this.hold(own, sentAt, acquiredAt);
        return;
      }
    }
    if (current.holder !== this.instanceId && !this.expired(current)) return;
    try {
      const updated = await this.o.table.updateEntity(
        { partitionKey: PARTITION, rowKey: this.rowKey, ...this.row(writeId, acquiredAt) },
        "Replace",
        { etag: current.etag },
      );
      this.o.logger.info("dispatch lease taken over", {
        instance: this.instanceId,
        previous_holder: current.holder,
        previous_host: current.host,
        previous_pid: current.pid,
      });
      this.hold(updated.etag as string, sentAt, acquiredAt);
    } catch (error) {
      if (!isStatus(error, 412) && !isStatus(error, 404)) throw error;
      const own = await this.ownWrite(writeId);
      if (own !== undefined) this.hold(own, sentAt, acquiredAt);
    }
  }

  /** Whether another holder's lease has run out, as this process can tell. */
  private expired(row: LeaseRow & { etag: string }): boolean {
    if (row.host === this.host && Number.isInteger(row.pid)) {
      // A holder on this host that is gone (crashed, killed): no need to wait. The same pid with
      // another identity is an earlier run of this process's pid (a restarted container).
      if (row.pid === this.pid ? row.holder !== this.instanceId : !processAlive(row.pid)) return true;
    }
    const at = this.now();
    if (this.observed?.etag !== row.etag) {
      this.observed = { etag: row.etag, at };
      return false;
    }
    return at - this.observed.at >= this.o.leaseDurationMs;
  }

  private hold(etag: string, sentAt: number, acquiredAt = this.acquiredAt): void {
    this.etag = etag;
    this.acquiredAt = acquiredAt;
    this.observed = undefined;
    // Counted from when the write was sent: the row can have changed no earlier than that.
    this.heldUntil = sentAt + (this.o.leaseDurationMs * 2) / 3;
    if (this.isHeld()) this.report(true);
  }

  private setLost(): void {
    this.etag = undefined;
    this.heldUntil = 0;
  }

  private report(held: boolean): void {
    if (held === this.reported) return;
    this.reported = held;
    if (held) {
      this.o.logger.info("dispatch lease acquired; this process dispatches jobs", { instance: this.instanceId });
      this.events?.acquired();
    } else {
      this.events?.lost();
    }
  }
}
