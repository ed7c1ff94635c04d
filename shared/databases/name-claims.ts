import type { TableClient } from "@azure/data-tables";
import type { Logger } from "../logging/logger.js";
import type { OrchestrationClient } from "../orchestrations/orchestration-client.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";
import { isStatus } from "../storage/table-text.js";
import { type AddStep, parseAddSteps } from "./build-steps.js";
import type { DatabaseUploadStore } from "./upload-store.js";

/** The table of database names being added from an upload (one row per name, insert-only claims). */
export const CLAIMS_TABLE = "databaseclaims";
const PARTITION = "claim";

/** How often an upload in progress shows it is alive (its claim's `touched_at`). */
export const CLAIM_HEARTBEAT_MS = 60_000;
/**
 * A claim untouched this long whose operation is not running was left by a crash (the upload's
 * process died before or after storing the file, before its build started): the sweep removes it
 * and its upload. Ten heartbeats: a slow but live upload is never taken.
 */
export const CLAIM_STALE_MS = 10 * CLAIM_HEARTBEAT_MS;

/** What a claim records: the operation that will build the database and its upload in the upload store. */
export interface ClaimRecord {
  name: string;
  operation_id: string;
  upload: string;
  claimed_at: string;
  touched_at: string;
}

/** A claim as read, with the version it was read at (removal and heartbeats are conditional on it). */
export interface HeldClaim extends ClaimRecord {
  etag: string;
  /** The build's steps, once the upload was checked (the operation reports them while it runs). */
  steps?: AddStep[];
}

/** A claim this process holds: it keeps it alive while uploading, checks it still holds it, and lets it go. */
export interface OwnClaim {
  readonly record: ClaimRecord;
  /** Refreshes `touched_at` (and records the build's steps); false when the claim was taken away (swept as stale). */
  touch(steps?: AddStep[]): Promise<boolean>;
  /** Removes the claim (absent or taken over is fine). */
  release(): Promise<void>;
}

/** Runs `touch` every `intervalMs` until stopped; answers whether every touch found the claim still held. */
export function keepAlive(claim: OwnClaim, intervalMs = CLAIM_HEARTBEAT_MS): { stop(): Promise<boolean> } {
  let held = true;
  let pending: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    pending = claim.touch().then(
      (ok) => {
        held &&= ok;
      },
      // A storage hiccup is not a lost claim: the next touch (or the final check) decides.
      () => undefined,
    );
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await pending;
      return held;
    },
  };
}

/** Whether a stored claim is the one this operation made for this upload. */
function sameOwner(held: ClaimRecord, owner: { operation_id: string; upload: string }): boolean {
  return held.operation_id === owner.operation_id && held.upload === owner.upload;
}

function recordOf(entity: Record<string, unknown>): HeldClaim {
  return {
    name: String(entity.rowKey),
    operation_id: String(entity.operation_id),
    upload: String(entity.upload),
    claimed_at: String(entity.claimed_at),
    touched_at: String(entity.touched_at),
    etag: String(entity.etag),
    steps: parseAddSteps(entity.steps),
  };
}

/**
 * Names being added from an upload, in Table storage. A claim is an insert-only entity keyed by the
 * database name, so of any number of simultaneous uploads of one name exactly one inserts it; the
 * others are told who holds it. The claim records the upload and its operation, so a crash that
 * leaves an upload with no build can be found and collected ({@link sweepStaleClaims}).
 */
export class DatabaseNameClaims {
  private readonly table: () => Promise<TableClient>;

  constructor(
    source: TableSource,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.table = tableOpener(source, CLAIMS_TABLE);
  }

  /** Claims `name` for the operation and upload; the claim held by another when the name is taken. */
  async claim(
    name: string,
    owner: { operation_id: string; upload: string },
  ): Promise<{ claim: OwnClaim } | { held: HeldClaim }> {
    const table = await this.table();
    const at = this.now().toISOString();
    const record: ClaimRecord = { name, ...owner, claimed_at: at, touched_at: at };
    // A claim released between a refused insert and its read is tried again.
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        const created = await table.createEntity({
          partitionKey: PARTITION,
          rowKey: name,
          operation_id: owner.operation_id,
          upload: owner.upload,
          claimed_at: at,
          touched_at: at,
        });
        return { claim: this.own(record, String(created.etag)) };
      } catch (error) {
        if (!isStatus(error, 409)) throw error;
        const held = await this.get(name);
        // Our own insert, answered 409 to the SDK's retry after its response was lost: ours.
        if (held && sameOwner(held, owner)) return { claim: this.own(held, held.etag) };
        if (held) return { held };
      }
    }
    throw new Error(`database name ${name}: its claim kept changing`);
  }

  private own(record: ClaimRecord, firstEtag: string): OwnClaim {
    let etag = firstEtag;
    const touch = async (steps?: AddStep[], again = true): Promise<boolean> => {
      const table = await this.table();
      try {
        const updated = await table.updateEntity(
          {
            partitionKey: PARTITION,
            rowKey: record.name,
            touched_at: this.now().toISOString(),
            ...(steps ? { steps: JSON.stringify(steps) } : {}),
          },
          "Merge",
          { etag },
        );
        etag = String(updated.etag);
        return true;
      } catch (error) {
        if (isStatus(error, 404)) return false;
        if (!isStatus(error, 412)) throw error;
        // Our own earlier touch, retried by the SDK after its response was lost, changed the etag:
        // the claim is still ours while the row records this operation and upload.
        const current = again ? await this.get(record.name) : undefined;
        if (!current || !sameOwner(current, record)) return false;
        etag = current.etag;
        return touch(steps, false);
      }
    };
    return {
      record,
      touch: (steps) => touch(steps),
      release: async () => {
        await this.releaseUpload(record.name, record.upload);
      },
    };
  }

  /** The claim on `name`, if any. */
  async get(name: string): Promise<HeldClaim | undefined> {
    const table = await this.table();
    try {
      return recordOf(await table.getEntity<Record<string, unknown>>(PARTITION, name));
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  /** Every claim. */
  async list(): Promise<HeldClaim[]> {
    const table = await this.table();
    const claims: HeldClaim[] = [];
    for await (const entity of table.listEntities<Record<string, unknown>>({
      queryOptions: { filter: `PartitionKey eq '${PARTITION}'` },
    }))
      claims.push(recordOf(entity));
    return claims;
  }

  /**
   * Removes the claim on `name` when it still records `upload` (the build of that upload ended): a
   * claim a later upload made after this one was swept is left alone.
   */
  async releaseUpload(name: string, upload: string): Promise<void> {
    const held = await this.get(name);
    if (held && held.upload === upload) await this.remove(held);
  }

  /** Records the build's steps in the claim of `name` when it still records `upload`; false when it does not. */
  async recordSteps(name: string, upload: string, steps: AddStep[]): Promise<boolean> {
    const held = await this.get(name);
    if (!held || held.upload !== upload) return false;
    const table = await this.table();
    try {
      await table.updateEntity({ partitionKey: PARTITION, rowKey: name, steps: JSON.stringify(steps) }, "Merge", {
        etag: held.etag,
      });
      return true;
    } catch (error) {
      if (isStatus(error, 404) || isStatus(error, 412)) return false;
      throw error;
    }
  }

  /** Removes the claim as it was read; false when it changed (a heartbeat) or went meanwhile. */
  async remove(claim: HeldClaim): Promise<boolean> {
    const table = await this.table();
    try {
      await table.deleteEntity(PARTITION, claim.name, { etag: claim.etag });
      return true;
    } catch (error) {
      if (isStatus(error, 404) || isStatus(error, 412)) return false;
      throw error;
    }
  }
}

/** Runtime statuses of an orchestration that has not ended: its claim is in use. */
const LIVE = new Set(["Pending", "Running", "Suspended", "ContinuedAsNew"]);

/** What {@link sweepStaleClaims} works with. */
export interface ClaimSweepDependencies {
  claims: DatabaseNameClaims;
  uploads: DatabaseUploadStore;
  orchestrations: Pick<OrchestrationClient, "getInstance">;
  logger: Logger;
  now?: () => Date;
}

/** Whether a claim was left by a crash: untouched for {@link CLAIM_STALE_MS} and its build not running. */
async function abandoned(claim: HeldClaim, dependencies: ClaimSweepDependencies, now: Date): Promise<boolean> {
  const touched = Date.parse(claim.touched_at);
  if (Number.isFinite(touched) && now.getTime() - touched < CLAIM_STALE_MS) return false;
  const instance = await dependencies.orchestrations.getInstance(claim.operation_id);
  return !instance || !LIVE.has(instance.runtimeStatus);
}

/**
 * Collects one claim left by a crash (see {@link abandoned}): the claim goes, then its upload.
 * Answers whether it was collected (a claim still in use, or changed meanwhile, stays).
 */
export async function collectIfAbandoned(claim: HeldClaim, dependencies: ClaimSweepDependencies): Promise<boolean> {
  const now = (dependencies.now ?? (() => new Date()))();
  if (!(await abandoned(claim, dependencies, now))) return false;
  if (!(await dependencies.claims.remove(claim))) return false;
  await dependencies.uploads.delete(claim.upload);
  dependencies.logger.warn("abandoned database upload collected", {
    name: claim.name,
    operation_id: claim.operation_id,
    claimed_at: claim.claimed_at,
  });
  return true;
}

/**
 * The sweep of uploads a crash left behind: every abandoned claim and its upload are removed, then
 * every stored upload no claim records that is older than {@link CLAIM_STALE_MS} (its claim went,
 * its removal did not). Answers how many of each it removed.
 */
export async function sweepStaleClaims(
  dependencies: ClaimSweepDependencies,
): Promise<{ claims: number; uploads: number }> {
  const now = (dependencies.now ?? (() => new Date()))();
  let claims = 0;
  const kept = new Set<string>();
  for (const claim of await dependencies.claims.list()) {
    if (await collectIfAbandoned(claim, { ...dependencies, now: () => now })) claims++;
    else kept.add(claim.upload);
  }
  let uploads = 0;
  for (const stored of await dependencies.uploads.list()) {
    if (kept.has(stored.name) || now.getTime() - stored.lastModified.getTime() < CLAIM_STALE_MS) continue;
    await dependencies.uploads.delete(stored.name);
    uploads++;
  }
  if (uploads > 0) dependencies.logger.warn("unclaimed database uploads removed", { count: uploads });
  return { claims, uploads };
}
