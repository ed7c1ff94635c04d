import { createHash } from "node:crypto";
import type { InventoryProvider, InventoryRecord, InventorySnapshot } from "./providers.js";

/** What the local inventory reads: the control plane's own databases, releases and jobs. */
export interface LocalInventorySources {
  databases(): Promise<{ name: string; version: string; warm_state: string; update_available: boolean }[]>;
  jobs(): Promise<{ job_id: string; status: string; db: string; title: string }[]>;
  /** Where these resources live, reported as their location (`local` on `npm start`). */
  location: string;
  now?: () => Date;
}

/**
 * Inventory over the control plane's own resources, so the console answers real questions on
 * `npm start`: each database, its prepared release (related to it) and each dashboard job
 * (related to its database). Every snapshot is read fresh; nodes are reported as a coverage gap.
 */
export function createLocalInventoryProvider(sources: LocalInventorySources): InventoryProvider {
  const now = sources.now ?? (() => new Date());
  return {
    async snapshot(): Promise<InventorySnapshot> {
      const [databases, jobs] = await Promise.all([sources.databases(), sources.jobs()]);
      const group = "blastplane";
      const records: InventoryRecord[] = [
        {
          name: group,
          type: "resource_group",
          location: sources.location,
          resource_group: group,
          state: "present",
          relations: [],
          kind: "resource_group",
        },
      ];
      for (const db of databases) {
        records.push({
          name: db.name,
          type: "blast_database",
          location: sources.location,
          resource_group: group,
          state: db.warm_state,
          relations: [`${db.name}@${db.version}`],
          kind: "resource",
        });
        records.push({
          name: `${db.name}@${db.version}`,
          type: "blast_database_release",
          location: sources.location,
          resource_group: group,
          state: db.update_available ? "update_available" : "current",
          relations: [db.name],
          kind: "derived",
        });
      }
      for (const job of jobs)
        records.push({
          name: job.job_id,
          type: "blast_job",
          location: sources.location,
          resource_group: group,
          state: job.status,
          relations: [job.db],
          kind: "resource",
        });
      const observed_at = now().toISOString();
      const snapshot_id = `local-${createHash("sha256")
        .update(`${observed_at}\n${records.map((r) => `${r.type}/${r.name}/${r.state}`).join("\n")}`)
        .digest("hex")
        .slice(0, 16)}`;
      return {
        snapshot_id,
        observed_at,
        scope: "local control plane",
        provenance: "blastplane local stores (database catalog, database state, dashboard jobs)",
        records,
        truncated: false,
        coverage_gaps: ["nodes"],
      };
    },
  };
}
