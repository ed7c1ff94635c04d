import { createHash } from "node:crypto";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import { isStatus } from "../../storage/table-text.js";
import type { ConversationReferenceLookup, TeamsConversationReference } from "./platform-a.js";

export const TEAMS_CONVERSATION_TABLE = "teamsconversations";

/** Who left a stored reference: the Teams sender, how it maps to the principal, and its tenant's trust. */
export interface ReferenceClaim {
  /** The Teams sender's object id (normalized). */
  sender: string;
  /** `binding`: `SVC_PLATFORM_A_PRINCIPAL_BINDINGS_JSON` maps it to the principal; `pairing`: an approver paired it. */
  source: "binding" | "pairing";
  trust: "same_tenant" | "guest";
}

/** The stored conversation references of chat platform A, by recipient (a canonical directory object id). */
export interface TeamsConversationStore extends ConversationReferenceLookup {
  /**
   * Keeps the reference a verified inbound activity of `principal` left behind. Without `claim` the
   * newest wins. With it, the stored reference is replaced only when `replaces` says so for the
   * stored row's claim (undefined: a row without one); the read and the write are ETag-checked, so
   * two senders writing at once cannot both pass.
   */
  save(
    principal: string,
    reference: TeamsConversationReference,
    claim?: ReferenceClaim,
    replaces?: (stored: ReferenceClaim | undefined) => boolean,
  ): Promise<void>;
}

/** The claim a stored row carries (rows written before claims were kept have none). */
function claimOf(row: Record<string, unknown>): ReferenceClaim | undefined {
  const { sender, source, trust } = row;
  if (typeof sender !== "string") return undefined;
  if (source !== "binding" && source !== "pairing") return undefined;
  if (trust !== "same_tenant" && trust !== "guest") return undefined;
  return { sender, source, trust };
}

/** Object ids compare case-insensitively (`sameObjectId`): the row key is the digest of the lower-cased id. */
const rowKey = (recipient: string) => createHash("sha256").update(recipient.trim().toLowerCase()).digest("hex");

/**
 * Conversation references in Table storage (table `teamsconversations`), with the configured
 * alert conversation (`SVC_PLATFORM_A_ALERT_CONVERSATION_ID` on `SVC_PLATFORM_A_SERVICE_URL`) as
 * the `operational` recipient. A reference is written only from a verified activity of a bound or
 * paired principal (one row per principal, replaced by the newest; bindings and pairings are each
 * at most 1,000 per channel), so a proactive message never goes to a conversation an unverified
 * sender named.
 */
export function createTeamsConversationStore(
  source: TableSource,
  options: { operational?: TeamsConversationReference } = {},
): TeamsConversationStore {
  const table = tableOpener(source, TEAMS_CONVERSATION_TABLE);
  return {
    async get(recipient) {
      if (recipient === "operational") return options.operational;
      try {
        const e = await (await table()).getEntity<Record<string, unknown>>("r", rowKey(recipient));
        if (typeof e.service_url !== "string" || typeof e.conversation_id !== "string") return undefined;
        return {
          serviceUrl: e.service_url,
          conversationId: e.conversation_id,
          ...(typeof e.tenant_id === "string" ? { tenantId: e.tenant_id } : {}),
          ...(typeof e.user_id === "string" ? { userId: e.user_id } : {}),
        };
      } catch (error) {
        if (isStatus(error, 404)) return undefined;
        throw error;
      }
    },
    async save(principal, reference, claim, replaces) {
      const t = await table();
      const entity = {
        partitionKey: "r",
        rowKey: rowKey(principal),
        service_url: reference.serviceUrl,
        conversation_id: reference.conversationId,
        ...(reference.tenantId ? { tenant_id: reference.tenantId } : {}),
        ...(reference.userId ? { user_id: reference.userId } : {}),
        ...(claim ? { sender: claim.sender, source: claim.source, trust: claim.trust } : {}),
        saved_at: new Date().toISOString(),
      };
      if (!claim || !replaces) {
        await t.upsertEntity(entity, "Replace");
        return;
      }
      for (let attempt = 0; attempt < 10; attempt++) {
        let stored: (Record<string, unknown> & { etag: string }) | undefined;
        try {
          stored = (await t.getEntity<Record<string, unknown>>("r", entity.rowKey)) as Record<string, unknown> & {
            etag: string;
          };
        } catch (error) {
          if (!isStatus(error, 404)) throw error;
        }
        try {
          if (!stored) await t.createEntity(entity);
          else if (replaces(claimOf(stored))) await t.updateEntity(entity, "Replace", { etag: stored.etag });
          return;
        } catch (error) {
          // Another activity of the principal wrote first: decide again against what it wrote.
          if (!isStatus(error, 409) && !isStatus(error, 412)) throw error;
        }
      }
    },
  };
}
