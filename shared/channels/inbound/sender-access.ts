import { createHash, randomInt, timingSafeEqual } from "node:crypto";
import type { TableClient } from "@azure/data-tables";
import { normalizeObjectId, sameObjectId } from "../../auth/object-id.js";
import type { Role } from "../../auth/roles.js";
import { roleRank } from "../../auth/roles.js";
import type { AuditActor, AuditLog } from "../../ops/audit.js";
import { isStatus } from "../../storage/table-text.js";
import { type TableSource, tableOpener } from "../../storage/table-source.js";
import type { AccessDecision, PrincipalDirectory, SenderAccess } from "./pipeline.js";
import type { ChannelInboundTurn, ChannelKind, SenderAccessMode } from "./types.js";

/**
 * Sender access, pairing and cross-channel identity links (spec operator-console.md §5 items 8–9,
 * §3 pairing rows, ledger C-291–C-293, C-394–C-411).
 *
 * - `disabled`: nobody is resolved. `allowlist`: only the configured principal bindings.
 *   `pairing`: the bindings, plus senders an approver paired.
 * - An unknown sender in `pairing` mode gets a one-time code (8 characters of a 32-letter
 *   alphabet, 40 bits) that expires after {@link PAIRING_TTL_MS}; only its SHA-256 digest is
 *   stored, in one of `pendingLimit` slots per channel (a strict bound: a slot is taken by an
 *   insert or an ETag-checked replace of an expired one).
 * - An approver (role Approver or above, and not the principal being mapped) submits the code with
 *   the sender id and an existing principal. The code is compared digest to digest in constant
 *   time; a wrong code counts against the challenge, which is deleted after
 *   {@link PAIRING_MAX_FAILURES} — so 10,000 guesses cost the guesser the challenge after five, and
 *   every refusal reads the same whatever was wrong.
 * - A mapping is inserted, never replaced: a paired or bound sender cannot re-enroll.
 * - Pairing grants identity resolution only: the principal's roles come from the directory.
 */

export const PAIRING_TTL_MS = 10 * 60_000;
export const PAIRING_MAX_FAILURES = 5;
/**
 * Failed approvals one approver may make per channel in {@link APPROVER_WINDOW_MS} before this
 * process refuses further attempts without touching storage (a cheap first gate against a
 * guessing loop; the durable bound is the challenge's own {@link PAIRING_MAX_FAILURES}).
 */
export const APPROVER_MAX_FAILURES = 20;
export const APPROVER_WINDOW_MS = 15 * 60_000;
/** Crockford-like alphabet without I, L, O, U: 32 letters, easy to read aloud. */
const CODE_ALPHABET = "ABCDEFGHJKMNPQRSTVWXYZ0123456789";
const CODE_LENGTH = 8;

export const CHANNEL_SENDERS_TABLE = "channelsenders";
/**
 * Approved pairings one channel holds at most: like the configured principal bindings (spec §8,
 * ≤ 1000), so what a paired sender leaves behind (its mapping, its Teams conversation reference
 * for notifications, one per principal) stays bounded.
 */
export const MAX_PAIRED_SENDERS = 1000;
/** The row (in each channel's mapping partition) counting its pairings; mapping rows are SHA-256 hex keys. */
const PAIRED_COUNTER_ROW = "paired_count";
/** Tries of the counted insert before concurrent approvals give up (each loss means another approval counted). */
const MAX_COUNTER_ATTEMPTS = 50;

/** A configured binding map: vendor user id → directory object id (≤ 1000 entries, checked at start). */
export type PrincipalBindings = ReadonlyMap<string, string>;

export interface ChannelAccessPolicy {
  mode: SenderAccessMode;
  bindings: PrincipalBindings;
  /** Pending pairing challenges allowed at once in this channel. */
  pendingLimit: number;
}

/** Why a pairing or link request was refused (the caller's answer names it; the audit keeps it). */
export class PairingRefusedError extends Error {
  constructor(
    readonly reason:
      | "not_authorized"
      | "separate_approver_required"
      | "unknown_principal"
      | "invalid_or_expired_code"
      | "already_mapped"
      | "same_channel_kind"
      | "endpoint_not_paired"
      | "different_principals"
      | "too_many_attempts"
      | "too_many_pairings",
    message: string,
  ) {
    super(message);
    this.name = "PairingRefusedError";
  }
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");
const senderKey = (vendorUserId: string) => sha256(`sender/${vendorUserId}`);

/** A fresh pairing code. */
export function newPairingCode(): string {
  let code = "";
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

/** The stored digest of a code (normalized: case and separators do not matter when typed). */
export function pairingCodeDigest(code: string): Buffer {
  return createHash("sha256")
    .update(`pairing/${code.toUpperCase().replace(/[\s-]/g, "")}`)
    .digest();
}

interface PendingRow {
  vendor_user_id: string;
  tenant_id: string;
  code_digest: string;
  expires_at: string;
  failures: number;
  challenge_id: string;
}

interface MappingRow {
  vendor_user_id: string;
  principal_oid: string;
  tenant_id: string;
  approved_by: string;
  approved_at: string;
}

/** A recorded cross-channel identity link: a record only; nothing is merged (C-411). */
export interface IdentityLink {
  link_id: string;
  principal_oid: string;
  endpoints: { channel: ChannelKind; vendor_user_id: string }[];
  approved_by: string;
  approved_at: string;
}

export interface SenderAccessDependencies {
  tables: TableSource;
  policies: Readonly<Partial<Record<ChannelKind, ChannelAccessPolicy>>>;
  directory: PrincipalDirectory;
  audit: AuditLog;
}

/** The sender-access service: the pipeline's {@link SenderAccess} plus the approver's acts. */
export function createSenderAccess(deps: SenderAccessDependencies) {
  const table = tableOpener(deps.tables, CHANNEL_SENDERS_TABLE);
  const policyOf = (channel: ChannelKind): ChannelAccessPolicy =>
    deps.policies[channel] ?? { mode: "disabled", bindings: new Map(), pendingLimit: 0 };
  const mapPartition = (channel: ChannelKind) => `map_${channel}`;
  const pendPartition = (channel: ChannelKind) => `pend_${channel}`;

  async function getRow<T extends object>(
    t: TableClient,
    pk: string,
    rk: string,
  ): Promise<(T & { etag: string }) | undefined> {
    try {
      return (await t.getEntity<T>(pk, rk)) as T & { etag: string };
    } catch (error) {
      if (isStatus(error, 404)) return undefined;
      throw error;
    }
  }

  async function mappingOf(channel: ChannelKind, vendorUserId: string): Promise<MappingRow | undefined> {
    return getRow<MappingRow>(await table(), mapPartition(channel), senderKey(vendorUserId));
  }

  /**
   * How many mapping rows `channel` holds, counted by listing (stops at {@link MAX_PAIRED_SENDERS}):
   * only to start the counter of a channel paired before the counter existed.
   */
  async function listedPairings(channel: ChannelKind): Promise<number> {
    let count = 0;
    for await (const _ of (await table()).listEntities({
      queryOptions: {
        filter: `PartitionKey eq '${mapPartition(channel)}' and RowKey ne '${PAIRED_COUNTER_ROW}'`,
        select: ["RowKey"],
      },
    }))
      if (++count >= MAX_PAIRED_SENDERS) break;
    return count;
  }

  /**
   * Inserts a mapping and counts it in one transaction with the channel's counter row (same
   * partition; created, or replaced under its ETag), so the {@link MAX_PAIRED_SENDERS} bound holds
   * when approvals run at once: of two approvals that read the same count, one transaction fails
   * (409/412) and reads the count again. Nothing is left half-done by a crash.
   */
  async function insertMapping(t: TableClient, channel: ChannelKind, vendorUserId: string, mapping: MappingRow) {
    const partitionKey = mapPartition(channel);
    for (let attempt = 0; attempt < MAX_COUNTER_ATTEMPTS; attempt++) {
      const counter = await getRow<{ paired: number }>(t, partitionKey, PAIRED_COUNTER_ROW);
      const paired = counter ? Number(counter.paired) : await listedPairings(channel);
      if (paired >= MAX_PAIRED_SENDERS)
        throw new PairingRefusedError(
          "too_many_pairings",
          `this channel holds ${MAX_PAIRED_SENDERS} pairings, the most it keeps`,
        );
      const next = { partitionKey, rowKey: PAIRED_COUNTER_ROW, paired: paired + 1 };
      try {
        await t.submitTransaction([
          ["create", { partitionKey, rowKey: senderKey(vendorUserId), ...mapping }],
          counter ? ["update", next, "Replace", { etag: counter.etag }] : ["create", next],
        ]);
        return;
      } catch (error) {
        if (!isStatus(error, 409) && !isStatus(error, 412)) throw error;
        // The sender was mapped meanwhile, or another approval counted first: read the count again.
        if (await mappingOf(channel, vendorUserId))
          throw new PairingRefusedError("already_mapped", "this sender is already mapped; a mapping is never replaced");
      }
    }
    throw new PairingRefusedError("too_many_attempts", "too many pairings are being approved at once; try again");
  }

  async function pendingSlots(channel: ChannelKind): Promise<(PendingRow & { rowKey: string; etag: string })[]> {
    const out: (PendingRow & { rowKey: string; etag: string })[] = [];
    const t = await table();
    for await (const row of t.listEntities<PendingRow>({
      queryOptions: { filter: `PartitionKey eq '${pendPartition(channel)}'` },
    }))
      out.push(row as PendingRow & { rowKey: string; etag: string });
    return out;
  }

  /** The principal a sender resolves to now (bindings first, then pairings), or undefined. */
  async function principalOf(channel: ChannelKind, vendorUserId: string): Promise<string | undefined> {
    const policy = policyOf(channel);
    if (policy.mode === "disabled") return undefined;
    const bound = policy.bindings.get(vendorUserId);
    if (bound) return bound;
    if (policy.mode !== "pairing") return undefined;
    return (await mappingOf(channel, vendorUserId))?.principal_oid;
  }

  async function issueChallenge(turn: ChannelInboundTurn, now: Date): Promise<AccessDecision> {
    const policy = policyOf(turn.channel);
    const t = await table();
    const slots = await pendingSlots(turn.channel);
    const live = (row: PendingRow) => Date.parse(row.expires_at) > now.getTime();
    if (slots.some((row) => live(row) && row.vendor_user_id === turn.sender.vendor_user_id))
      return {
        status: "refused",
        reason: "pairing_pending",
        reply: "A pairing request for you is already waiting for an approver.",
      };
    const code = newPairingCode();
    const expires_at = new Date(now.getTime() + PAIRING_TTL_MS).toISOString();
    const challenge_id = sha256(`${turn.channel}/${turn.sender.vendor_user_id}/${now.toISOString()}/${code}`).slice(
      0,
      24,
    );
    const row: PendingRow = {
      vendor_user_id: turn.sender.vendor_user_id,
      tenant_id: turn.sender.tenant_id,
      code_digest: pairingCodeDigest(code).toString("hex"),
      expires_at,
      failures: 0,
      challenge_id,
    };
    const byKey = new Map(slots.map((s) => [s.rowKey, s]));
    for (let i = 0; i < policy.pendingLimit; i++) {
      const rowKey = `slot_${i}`;
      const existing = byKey.get(rowKey);
      const entity = { partitionKey: pendPartition(turn.channel), rowKey, ...row };
      try {
        if (!existing) await t.createEntity(entity);
        else if (!live(existing)) await t.updateEntity(entity, "Replace", { etag: existing.etag });
        else continue;
      } catch (error) {
        // Another host took the slot first: try the next one.
        if (isStatus(error, 409) || isStatus(error, 412)) continue;
        throw error;
      }
      return {
        status: "challenge",
        challenge_id,
        expires_at,
        reply: `You are not paired with this service yet. Give this one-time code to an approver, who will pair you with your account: ${code} (expires ${expires_at}). This code grants no access by itself.`,
      };
    }
    return {
      status: "refused",
      reason: "pairing_full",
      reply: "Too many pairing requests are waiting; try again later.",
    };
  }

  const access: SenderAccess = {
    async resolve(turn, now) {
      const policy = policyOf(turn.channel);
      if (policy.mode === "disabled") return { status: "refused", reason: "channel_disabled" };
      const oid = await principalOf(turn.channel, turn.sender.vendor_user_id);
      if (oid) return { status: "resolved", principal: { oid, tenant_id: turn.sender.tenant_id } };
      if (policy.mode === "allowlist")
        return {
          status: "refused",
          reason: "unknown_sender",
          reply: "You are not authorized to use this service from this channel.",
        };
      return issueChallenge(turn, now);
    },
    async discardChallenge(channel, challengeId) {
      const t = await table();
      for (const slot of await pendingSlots(channel))
        if (slot.challenge_id === challengeId)
          await t.deleteEntity(pendPartition(channel), slot.rowKey, { etag: slot.etag }).catch((error: unknown) => {
            if (!isStatus(error, 404) && !isStatus(error, 412)) throw error;
          });
    },
  };

  /**
   * Counts one wrong code against a challenge, deleting it at {@link PAIRING_MAX_FAILURES}. Every
   * wrong code counts, also when many arrive at once: an increment that lost the ETag race reads
   * the row again and retries (concurrent guesses must not share one count).
   */
  async function countWrongCode(t: TableClient, channel: ChannelKind, rowKey: string, challengeId: string) {
    for (;;) {
      const row = await getRow<PendingRow>(t, pendPartition(channel), rowKey);
      // Gone, or the slot now holds another challenge: nothing left to count against.
      if (!row || row.challenge_id !== challengeId) return;
      const failures = Number(row.failures) + 1;
      try {
        if (failures >= PAIRING_MAX_FAILURES) await t.deleteEntity(pendPartition(channel), rowKey, { etag: row.etag });
        else
          await t.updateEntity({ partitionKey: pendPartition(channel), rowKey, failures }, "Merge", { etag: row.etag });
        return;
      } catch (error) {
        if (isStatus(error, 404)) return;
        if (!isStatus(error, 412)) throw error;
      }
    }
  }

  // Per approver and channel: failures in the current window (bounded: oldest entries evicted).
  const failures = new Map<string, { count: number; since: number }>();
  const failureKey = (oid: string, channel: ChannelKind) => `${normalizeObjectId(oid)}/${channel}`;
  const lockedOut = (oid: string, channel: ChannelKind, now: Date) => {
    const entry = failures.get(failureKey(oid, channel));
    return (
      entry !== undefined && now.getTime() - entry.since < APPROVER_WINDOW_MS && entry.count >= APPROVER_MAX_FAILURES
    );
  };
  const countFailure = (oid: string, channel: ChannelKind, now: Date) => {
    const key = failureKey(oid, channel);
    const entry = failures.get(key);
    if (!entry || now.getTime() - entry.since >= APPROVER_WINDOW_MS)
      failures.set(key, { count: 1, since: now.getTime() });
    else entry.count++;
    if (failures.size > 1000) failures.delete(failures.keys().next().value as string);
  };

  const approverFloor: Role = "Approver";
  async function requireApprover(approver: { oid: string; role: Role | undefined }, principalOid: string) {
    if (!approver.role || roleRank(approver.role) < roleRank(approverFloor))
      throw new PairingRefusedError("not_authorized", `pairing needs the ${approverFloor} role`);
    if (sameObjectId(approver.oid, principalOid))
      throw new PairingRefusedError(
        "separate_approver_required",
        "a separate approver must approve: nobody pairs a channel identity to their own principal",
      );
    if (!(await deps.directory.lookup(principalOid)))
      throw new PairingRefusedError("unknown_principal", "the principal is not known to the directory");
  }

  return {
    access,
    principalOf,

    /**
     * An approver pairs `vendorUserId` of `channel` with the existing principal `principalOid`,
     * presenting the sender's code. Every refusal is audited; a wrong or expired code and a sender
     * with no challenge read the same.
     */
    async approvePairing(input: {
      channel: ChannelKind;
      vendorUserId: string;
      code: string;
      principalOid: string;
      approver: AuditActor & { role: Role | undefined };
      requestId: string;
      now: Date;
    }): Promise<{ principal_oid: string; vendor_user_id: string; channel: ChannelKind }> {
      const { channel, vendorUserId, now } = input;
      const actor = { oid: input.approver.oid, name: input.approver.name };
      const audit = (outcome: "succeeded" | "denied", details: Record<string, unknown>) =>
        deps.audit.record({
          actor,
          action: "channel.pairing_approve",
          target: `${channel}:${senderKey(vendorUserId).slice(0, 16)}`,
          outcome,
          request_id: input.requestId,
          details,
          visibility_floor: "Approver",
        });
      // Past the bound, nothing is read or written (not even an audit entry per attempt).
      if (lockedOut(input.approver.oid, channel, now))
        throw new PairingRefusedError("too_many_attempts", "too many failed pairing attempts; try again later");
      try {
        await requireApprover(input.approver, input.principalOid);
        if (policyOf(channel).bindings.has(vendorUserId) || (await mappingOf(channel, vendorUserId)))
          throw new PairingRefusedError("already_mapped", "this sender is already mapped; a mapping is never replaced");
        const presented = pairingCodeDigest(input.code);
        const slots = await pendingSlots(channel);
        const slot = slots.find((s) => s.vendor_user_id === vendorUserId && Date.parse(s.expires_at) > now.getTime());
        // Compare against a digest either way, so a missing challenge costs the same as a wrong code.
        const stored = slot ? Buffer.from(slot.code_digest, "hex") : pairingCodeDigest(newPairingCode());
        const match = timingSafeEqual(presented, stored) && slot !== undefined;
        const t = await table();
        if (!slot || !match) {
          if (slot) await countWrongCode(t, channel, slot.rowKey, slot.challenge_id);
          throw new PairingRefusedError("invalid_or_expired_code", "no pending pairing matches that sender and code");
        }
        const mapping: MappingRow = {
          vendor_user_id: vendorUserId,
          principal_oid: input.principalOid,
          tenant_id: slot.tenant_id,
          approved_by: input.approver.oid,
          approved_at: now.toISOString(),
        };
        await insertMapping(t, channel, vendorUserId, mapping);
        await t.deleteEntity(pendPartition(channel), slot.rowKey).catch((error: unknown) => {
          if (!isStatus(error, 404)) throw error;
        });
        await audit("succeeded", { principal_oid: input.principalOid, channel });
        return { principal_oid: input.principalOid, vendor_user_id: vendorUserId, channel };
      } catch (error) {
        if (error instanceof PairingRefusedError) {
          if (error.reason === "invalid_or_expired_code") countFailure(input.approver.oid, channel, now);
          await audit("denied", {
            reason: error.reason,
            channel,
            ...(lockedOut(input.approver.oid, channel, now) ? { locked_out: true } : {}),
          });
        }
        throw error;
      }
    },

    /**
     * Links two senders of different channel kinds that were each paired to the same principal,
     * approved by a separate actor (C-405–C-411). Idempotent by a deterministic link id; the link
     * is a record only: no principal, role, session or audit history is merged.
     */
    async approveLink(input: {
      endpoints: [{ channel: ChannelKind; vendorUserId: string }, { channel: ChannelKind; vendorUserId: string }];
      approver: AuditActor & { role: Role | undefined };
      requestId: string;
      now: Date;
    }): Promise<IdentityLink> {
      const [a, b] = [...input.endpoints].sort((x, y) =>
        `${x.channel}/${x.vendorUserId}`.localeCompare(`${y.channel}/${y.vendorUserId}`),
      ) as typeof input.endpoints;
      const link_id = `lnk_${sha256(`link/${a.channel}/${a.vendorUserId}/${b.channel}/${b.vendorUserId}`).slice(0, 24)}`;
      const actor = { oid: input.approver.oid, name: input.approver.name };
      const audit = (outcome: "succeeded" | "denied", details: Record<string, unknown>) =>
        deps.audit.record({
          actor,
          action: "channel.identity_link",
          target: link_id,
          outcome,
          request_id: input.requestId,
          details,
          visibility_floor: "Approver",
        });
      try {
        if (a.channel === b.channel)
          throw new PairingRefusedError("same_channel_kind", "a link joins senders of two different channel kinds");
        const [ma, mb] = [await mappingOf(a.channel, a.vendorUserId), await mappingOf(b.channel, b.vendorUserId)];
        if (!ma || !mb)
          throw new PairingRefusedError("endpoint_not_paired", "both senders must first be paired independently");
        if (!sameObjectId(ma.principal_oid, mb.principal_oid))
          throw new PairingRefusedError("different_principals", "the two senders are paired to different principals");
        if (!input.approver.role || roleRank(input.approver.role) < roleRank(approverFloor))
          throw new PairingRefusedError("not_authorized", `linking needs the ${approverFloor} role`);
        if (sameObjectId(input.approver.oid, ma.principal_oid))
          throw new PairingRefusedError("separate_approver_required", "a separate actor must approve the link");
        const link: IdentityLink = {
          link_id,
          principal_oid: ma.principal_oid,
          endpoints: [
            { channel: a.channel, vendor_user_id: a.vendorUserId },
            { channel: b.channel, vendor_user_id: b.vendorUserId },
          ],
          approved_by: input.approver.oid,
          approved_at: input.now.toISOString(),
        };
        const t = await table();
        try {
          await t.createEntity({ partitionKey: "link", rowKey: link_id, doc: JSON.stringify(link) });
        } catch (error) {
          if (!isStatus(error, 409)) throw error;
          // A retry: the first link stands.
          const existing = await getRow<{ doc: string }>(t, "link", link_id);
          return JSON.parse(String(existing?.doc)) as IdentityLink;
        }
        await audit("succeeded", { principal_oid: link.principal_oid });
        return link;
      } catch (error) {
        if (error instanceof PairingRefusedError) await audit("denied", { reason: error.reason });
        throw error;
      }
    },

    /** Every recorded link (for listing). */
    async listLinks(): Promise<IdentityLink[]> {
      const out: IdentityLink[] = [];
      for await (const row of (await table()).listEntities<{ doc: string }>({
        queryOptions: { filter: "PartitionKey eq 'link'" },
      }))
        out.push(JSON.parse(row.doc) as IdentityLink);
      return out;
    },
  };
}

export type SenderAccessService = ReturnType<typeof createSenderAccess>;
