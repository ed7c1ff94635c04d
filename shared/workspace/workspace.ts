import { z } from "zod";
import { PreconditionFailedError, PreconditionRequiredError } from "../errors.js";
import type { AuditActor } from "../ops/audit.js";
import { type TableSource, tableOpener } from "../storage/table-source.js";
import { isStatus, packText, unpackText } from "../storage/table-text.js";

/** Azure resource group names: letters (any script), digits, `_ - . ( )`; not ending in `.`. */
const RESOURCE_GROUP = /^[\p{L}\p{N}_.()-]*[\p{L}\p{N}_()-]$/u;
/** Azure region names as the ARM API spells them: `westeurope`, `eastus2`, `eastus2euap`. */
const LOCATION = /^[a-z][a-z0-9]{2,39}$/;
/** AKS cluster names: letters, digits, `-`, `_`; first and last character alphanumeric. */
const CLUSTER_NAME = /^[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?$/;
/** VM sizes: `Standard_D4s_v5`, `Standard_E64-32s_v5` (constrained vCPU), `Standard_NC24ads_A100_v4`. */
const NODE_SIZE = /^(?:Standard|Basic)_[A-Za-z]+[0-9]+[A-Za-z0-9-]*(?:_[A-Za-z0-9]+)*$/;
const GUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * The workspace configuration: where the control plane's Azure resources live. Kept server-side so
 * timers and orchestrations know it (a workspace kept only in the browser is unknown to scheduled
 * work, DESIGN §7). Strict: unknown fields are refused, and each rule follows Azure's naming rules
 * so a bad name is refused here rather than by ARM halfway through provisioning.
 */
export const workspaceSchema = z.strictObject({
  subscription_id: z.string().regex(GUID, "must be a subscription GUID (8-4-4-4-12 hexadecimal digits)"),
  resource_group: z
    .string()
    .min(1, { message: "must not be empty", abort: true })
    .max(90, "must be at most 90 characters")
    .regex(RESOURCE_GROUP, "may contain letters, digits, '-', '_', '.', '(' and ')', and must not end with '.'"),
  location: z.string().regex(LOCATION, "must be a lowercase Azure region name such as 'westeurope'"),
  storage_account: z.string().regex(/^[a-z0-9]{3,24}$/, "must be 3-24 lowercase letters or digits"),
  registry: z.string().regex(/^[A-Za-z0-9]{5,50}$/, "must be 5-50 letters or digits"),
  cluster_name: z
    .string()
    .min(1, { message: "must not be empty", abort: true })
    .max(63, "must be at most 63 characters")
    .regex(CLUSTER_NAME, "may contain letters, digits, '-' and '_', and must start and end with a letter or digit"),
  node_size: z
    .string()
    .max(64, "must be at most 64 characters")
    .regex(NODE_SIZE, "must be an Azure VM size such as 'Standard_D4s_v5'"),
  node_count: z.number().int("must be a whole number").min(1, "must be at least 1").max(100, "must be at most 100"),
});

/** A valid workspace configuration. */
export type Workspace = z.infer<typeof workspaceSchema>;

/** The saved workspace with its version (`etag`) and who saved it when. */
export interface StoredWorkspace {
  workspace: Workspace;
  /** Opaque version; send it back as `If-Match` to update. */
  etag: string;
  updated_at: string;
  updated_by: AuditActor;
}

/** The outcome of a save: the new version, and the configuration it replaced (if any). */
export interface SavedWorkspace extends StoredWorkspace {
  previous: Workspace | undefined;
}

/** Options of {@link WorkspaceStore.put}. */
export interface PutWorkspaceOptions {
  /** The version the save replaces; none to create the first one. */
  ifMatch?: string | undefined;
  /** Who saves it. */
  actor: AuditActor;
}

/** Options of {@link createWorkspaceStore}. */
export interface WorkspaceStoreOptions {
  /** The clock (tests set it). */
  now?: () => Date;
}

/** The one workspace configuration, with optimistic concurrency on its ETag. */
export interface WorkspaceStore {
  /** The saved workspace, or undefined when none has been saved yet. */
  get(): Promise<StoredWorkspace | undefined>;
  /**
   * Saves the workspace.
   *
   * - No workspace yet, no `ifMatch`: creates it. (Two racing creates: the second gets 428.)
   * - A workspace exists, no `ifMatch`: {@link PreconditionRequiredError} (428) — updates must
   *   name the version they replace.
   * - `ifMatch` equal to the current etag: replaces it, conditionally on that etag.
   * - `ifMatch` of `*`: replaces whatever version exists (HTTP's "any current representation";
   *   a save racing in between still makes it a 409).
   * - `ifMatch` stale, or naming a workspace that does not exist: {@link PreconditionFailedError} (412).
   */
  put(workspace: Workspace, options: PutWorkspaceOptions): Promise<SavedWorkspace>;
}

export const WORKSPACE_TABLE = "workspace";
const PARTITION = "workspace";
const ROW = "current";

function fromEntity(entity: Record<string, unknown>): StoredWorkspace {
  return {
    workspace: JSON.parse(unpackText(entity, "doc")) as Workspace,
    etag: String(entity.etag),
    updated_at: String(entity.updated_at),
    updated_by: { oid: String(entity.updated_by_oid), name: String(entity.updated_by_name ?? "") },
  };
}

/** Opens the workspace store in Table storage (table `workspace`, one entity). */
export function createWorkspaceStore(source: TableSource, options: WorkspaceStoreOptions = {}): WorkspaceStore {
  const table = tableOpener(source, WORKSPACE_TABLE);
  const now = options.now ?? (() => new Date());

  async function get(): Promise<StoredWorkspace | undefined> {
    try {
      return fromEntity(await (await table()).getEntity<Record<string, unknown>>(PARTITION, ROW));
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  return {
    get,
    async put(workspace, { ifMatch, actor }) {
      const valid = workspaceSchema.parse(workspace);
      const client = await table();
      const current = await get();
      const updatedAt = now().toISOString();
      const entity = {
        partitionKey: PARTITION,
        rowKey: ROW,
        updated_at: updatedAt,
        updated_by_oid: actor.oid,
        updated_by_name: actor.name,
        ...packText("doc", JSON.stringify(valid)),
      };
      const saved = (etag: string | undefined): SavedWorkspace => {
        if (!etag) throw new Error("storage returned no etag");
        return { workspace: valid, etag, updated_at: updatedAt, updated_by: actor, previous: current?.workspace };
      };

      if (ifMatch === undefined) {
        if (current)
          throw new PreconditionRequiredError("a workspace is already saved: send its etag in If-Match to update it");
        try {
          return saved((await client.createEntity(entity)).etag);
        } catch (error) {
          if (isStatus(error, 409))
            throw new PreconditionRequiredError(
              "a workspace was saved meanwhile: send its etag in If-Match to update it",
            );
          throw error;
        }
      }
      // RFC 9110 §13.1.1: If-Match is false when no current representation exists, or none matches.
      if (!current) throw new PreconditionFailedError("no workspace is saved yet: send no If-Match to create it");
      if (ifMatch !== "*" && ifMatch !== current.etag) {
        throw new PreconditionFailedError(
          "the workspace was changed since it was read: read it again and retry with the new etag",
        );
      }
      try {
        // Conditional on the version just compared, so a save between the read and this write loses.
        return saved((await client.updateEntity(entity, "Replace", { etag: current.etag })).etag);
      } catch (error) {
        if (isStatus(error, 412) || isStatus(error, 404)) {
          throw new PreconditionFailedError(
            "the workspace was changed since it was read: read it again and retry with the new etag",
          );
        }
        throw error;
      }
    },
  };
}
