import { createHash } from "node:crypto";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import { isStatus } from "../../storage/table-text.js";
import type { ConversationReferenceLookup, TeamsConversationReference } from "./platform-a.js";

export const TEAMS_CONVERSATION_TABLE = "teamsconversations";

/** The stored conversation references of chat platform A, by recipient (a canonical directory object id). */
export interface TeamsConversationStore extends ConversationReferenceLookup {
  /** Keeps the reference a verified inbound activity of `principal` left behind (the newest wins). */
  save(principal: string, reference: TeamsConversationReference): Promise<void>;
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
    async save(principal, reference) {
      await (await table()).upsertEntity(
        {
          partitionKey: "r",
          rowKey: rowKey(principal),
          service_url: reference.serviceUrl,
          conversation_id: reference.conversationId,
          ...(reference.tenantId ? { tenant_id: reference.tenantId } : {}),
          ...(reference.userId ? { user_id: reference.userId } : {}),
          saved_at: new Date().toISOString(),
        },
        "Replace",
      );
    },
  };
}
