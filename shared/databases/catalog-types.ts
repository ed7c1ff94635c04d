/**
 * The database catalog's types, shared by the file catalog (`database-catalog.ts`, one machine)
 * and the table catalog (`table-catalog.ts`, Table storage and the release store): each
 * implements {@link DatabaseCatalog}, and the table catalog is also a {@link ReleasePublisher}.
 */
import type { DatabaseManifest } from "../blast/database-builder.js";

/** A prepared database release, as executors read it. */
export interface DatabaseEntry {
  manifest: DatabaseManifest;
  /** Absolute folder of this release. */
  root: string;
  /** Credential-free storage location reported as the job status `db` field. */
  location: string;
}

/** Where the services and executors find prepared databases: the file catalog or the table catalog. */
export interface DatabaseCatalog {
  list(): Promise<DatabaseEntry[]>;
  /** The current release of a database, or a given one. */
  get(name: string, version?: string): Promise<DatabaseEntry | undefined>;
  /** Keeps a release from being pruned while `holder` (a job) needs it, until {@link release}. */
  hold(name: string, version: string, holder: string): Promise<void>;
  release(name: string, version: string, holder: string): Promise<void>;
}

/** A catalog that publishes: the part of the table catalog that `db add` and prepare use. */
export interface ReleasePublisher {
  /** Publishes the built release folder `dir` to the store and makes it current. */
  publish(dir: string, manifest: DatabaseManifest): Promise<void>;
}
