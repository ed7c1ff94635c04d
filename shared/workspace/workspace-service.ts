import type { Caller } from "../auth/roles.js";
import { ConflictError, NotFoundError, PreconditionFailedError, PreconditionRequiredError } from "../errors.js";
import type { AuditLog } from "../ops/audit.js";
import type { StoredWorkspace, Workspace, WorkspaceStore } from "./workspace.js";

/** What the workspace service is built from. */
export interface WorkspaceServiceDependencies {
  store: WorkspaceStore;
  audit: Pick<AuditLog, "record">;
}

/** Options of {@link WorkspaceService.save}. */
export interface SaveWorkspaceOptions {
  /** The version the save replaces (`If-Match`); none to create the first one. */
  ifMatch: string | undefined;
  /** The request the save is audited under. */
  requestId: string;
}

function changedFields(before: Workspace | undefined, after: Workspace): string[] {
  return (Object.keys(after) as (keyof Workspace)[]).filter((field) => before?.[field] !== after[field]);
}

/**
 * The workspace configuration: read it, and save it with optimistic concurrency. Every save and
 * every save refused for its version is audited as `workspace.update`.
 */
export function createWorkspaceService(dependencies: WorkspaceServiceDependencies) {
  const { store, audit } = dependencies;
  return {
    /** The saved workspace; NotFoundError until one is saved. */
    async get(): Promise<StoredWorkspace> {
      const current = await store.get();
      if (!current) throw new NotFoundError("no workspace configuration has been saved yet");
      return current;
    },

    /**
     * Saves the workspace (see {@link WorkspaceStore.put} for the version rules: a missing
     * `ifMatch` on an existing workspace is a PreconditionRequiredError, a stale one a
     * PreconditionFailedError).
     */
    async save(caller: Caller, workspace: Workspace, options: SaveWorkspaceOptions): Promise<StoredWorkspace> {
      const actor = { oid: caller.oid, name: caller.name };
      const base = { actor, action: "workspace.update", target: "workspace", request_id: options.requestId };
      let saved: Awaited<ReturnType<WorkspaceStore["put"]>>;
      try {
        saved = await store.put(workspace, { ifMatch: options.ifMatch, actor });
      } catch (error) {
        if (
          error instanceof ConflictError ||
          error instanceof PreconditionFailedError ||
          error instanceof PreconditionRequiredError
        ) {
          await audit.record({ ...base, outcome: "failed", details: { error: error.name, reason: error.message } });
        }
        throw error;
      }
      await audit.record({
        ...base,
        outcome: "succeeded",
        details: {
          created: saved.previous === undefined,
          changed_fields: changedFields(saved.previous, saved.workspace),
          etag: saved.etag,
        },
      });
      const { previous: _previous, ...stored } = saved;
      return stored;
    },
  };
}

/** The workspace service's interface. */
export type WorkspaceService = ReturnType<typeof createWorkspaceService>;
