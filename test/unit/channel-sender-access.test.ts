import type { TableClient } from "@azure/data-tables";
import { describe, expect, it } from "vitest";
import type { Role } from "../../shared/auth/roles.js";
import {
  createSenderAccess,
  APPROVER_MAX_FAILURES,
  MAX_PAIRED_SENDERS,
  PAIRING_MAX_FAILURES,
  PairingRefusedError,
  pairingCodeDigest,
} from "../../shared/channels/inbound/sender-access.js";
import type { ChannelInboundTurn, ChannelKind, SenderAccessMode } from "../../shared/channels/inbound/types.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { azuriteTables } from "../support/service-fakes.js";

const azurite = azuriteTables("chsa");
const NOW = new Date("2026-03-01T10:00:00Z");
const PRINCIPAL = "0f8fad5b-d9cb-469f-a165-70867728950e";
const APPROVER = { oid: "aaaaaaaa-0000-0000-0000-000000000001", name: "Approver", role: "Approver" as Role };

function turnOf(vendorUserId: string, channel: ChannelKind = "platform_b"): ChannelInboundTurn {
  return {
    turn_id: "t",
    channel,
    sender: { vendor_user_id: vendorUserId, tenant_id: "T1", guest: false },
    conversation: { id: "C1" },
    input: "message",
    text: "hi",
    attachments: [],
    a1: "browser",
    received_at: NOW.toISOString(),
    reply_context: {},
  };
}

function service(mode: SenderAccessMode, options: { pendingLimit?: number; bindings?: [string, string][] } = {}) {
  const tables = azurite.tables();
  const audit = createAuditLog(tables);
  const policy = { mode, bindings: new Map(options.bindings ?? []), pendingLimit: options.pendingLimit ?? 3 };
  const svc = createSenderAccess({
    tables,
    policies: { platform_b: policy, platform_a: { ...policy, bindings: new Map() } },
    // The directory knows the principal (upper case: ids compare with sameObjectId) and the approver.
    directory: {
      lookup: async (oid) =>
        oid.toLowerCase() === PRINCIPAL || oid === APPROVER.oid ? { name: "Known", roles: [] } : undefined,
    },
    audit,
  });
  return { svc, audit, tables };
}

const codeOf = (reply: string) => /code[^:]*: ([A-Z0-9]{8})/.exec(reply)?.[1] ?? "";

async function challenge(svc: ReturnType<typeof service>["svc"], user: string, channel: ChannelKind = "platform_b") {
  const decision = await svc.access.resolve(turnOf(user, channel), NOW);
  if (decision.status !== "challenge") throw new Error(`expected a challenge, got ${decision.status}`);
  return { ...decision, code: codeOf(decision.reply) };
}

const approve = (svc: ReturnType<typeof service>["svc"], input: Partial<Parameters<typeof svc.approvePairing>[0]>) =>
  svc.approvePairing({
    channel: "platform_b",
    vendorUserId: "U1",
    code: "",
    principalOid: PRINCIPAL.toUpperCase(),
    approver: APPROVER,
    requestId: "r",
    now: NOW,
    ...input,
  });

const refusal = async (p: Promise<unknown>) => {
  const error = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(PairingRefusedError);
  return (error as PairingRefusedError).reason;
};

describe("sender access and pairing (spec §5 item 8)", () => {
  it("C-394 a disabled channel resolves nobody, not even a bound sender", async () => {
    const { svc } = service("disabled", { bindings: [["U1", PRINCIPAL]] });
    expect(await svc.access.resolve(turnOf("U1"), NOW)).toEqual({ status: "refused", reason: "channel_disabled" });
  });

  it("C-395 allowlist mode resolves only bound senders", async () => {
    const { svc } = service("allowlist", { bindings: [["U1", PRINCIPAL]] });
    expect(await svc.access.resolve(turnOf("U1"), NOW)).toMatchObject({
      status: "resolved",
      principal: { oid: PRINCIPAL },
    });
    expect(await svc.access.resolve(turnOf("U2"), NOW)).toMatchObject({ status: "refused", reason: "unknown_sender" });
  });

  it("C-397 C-398 C-291 C-292 a challenge stores only the code's digest; the approver's valid code maps the sender", async () => {
    const { svc, tables } = service("pairing");
    const c = await challenge(svc, "U1");
    expect(c.code).toMatch(/^[A-Z0-9]{8}$/);
    // Only the digest is stored.
    const rows: Record<string, unknown>[] = [];
    for await (const row of tables("channelsenders").listEntities()) rows.push(row);
    expect(JSON.stringify(rows)).not.toContain(c.code);
    expect(JSON.stringify(rows)).toContain(pairingCodeDigest(c.code).toString("hex"));
    const paired = await approve(svc, { code: c.code.toLowerCase() });
    expect(paired.principal_oid).toBe(PRINCIPAL.toUpperCase());
    expect(await svc.access.resolve(turnOf("U1"), NOW)).toMatchObject({ status: "resolved" });
  });

  it("C-397 a code used after expiry is refused", async () => {
    const { svc } = service("pairing");
    const c = await challenge(svc, "U1");
    expect(await refusal(approve(svc, { code: c.code, now: new Date(NOW.getTime() + 11 * 60_000) }))).toBe(
      "invalid_or_expired_code",
    );
  });

  it("C-399 pending pairing requests are bounded per channel; C-293 a discarded challenge frees its slot", async () => {
    const { svc } = service("pairing", { pendingLimit: 2 });
    const first = await challenge(svc, "U1");
    await challenge(svc, "U2");
    expect(await svc.access.resolve(turnOf("U3"), NOW)).toMatchObject({ status: "refused", reason: "pairing_full" });
    // The other channel has its own bound.
    await challenge(svc, "U3", "platform_a");
    await svc.access.discardChallenge("platform_b", first.challenge_id);
    await challenge(svc, "U3");
    // One pending request per sender.
    expect(await svc.access.resolve(turnOf("U3"), NOW)).toMatchObject({ reason: "pairing_pending" });
  });

  it("C-292 a channel keeps at most 1,000 pairings (like the bindings, spec §8): a valid code past the bound maps nothing", async () => {
    const { svc, tables } = service("pairing");
    const c = await challenge(svc, "U1");
    const t = tables("channelsenders");
    for (let batch = 0; batch < 10; batch++)
      await t.submitTransaction(
        Array.from({ length: 100 }, (_, i) => [
          "create" as const,
          { partitionKey: "map_platform_b", rowKey: `filler${batch * 100 + i}`, principal_oid: PRINCIPAL },
        ]),
      );
    expect(MAX_PAIRED_SENDERS).toBe(1000);
    expect(await refusal(approve(svc, { code: c.code }))).toBe("too_many_pairings");
    expect(await svc.access.resolve(turnOf("U1"), NOW)).toMatchObject({ reason: "pairing_pending" });
  });

  it("C-292 the 1,000-pairing bound holds under concurrent approvals: with one place left, five approvals that each read the count before any writes map exactly one sender", async () => {
    const base = azurite.tables();
    // A barrier in front of the mapping writes: once armed, no approval writes its mapping until all
    // five have reached that point (each having read the count), so the race is certain, not likely.
    const parties = 5;
    let armed = false;
    let arrived = 0;
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const held = async (entity: { partitionKey?: string } | undefined) => {
      if (!armed || entity?.partitionKey !== "map_platform_b" || arrived >= parties) return;
      if (++arrived === parties) open();
      await gate;
    };
    const tables = (name: string): TableClient => {
      const client = base(name);
      return new Proxy(client, {
        get(target, prop) {
          if (prop === "createEntity")
            return async (...args: Parameters<TableClient["createEntity"]>) => {
              await held(args[0]);
              return target.createEntity(...args);
            };
          if (prop === "submitTransaction")
            return async (...args: Parameters<TableClient["submitTransaction"]>) => {
              await held(args[0][0]?.[1]);
              return target.submitTransaction(...args);
            };
          const value = Reflect.get(target, prop, target) as unknown;
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    };
    const svc = createSenderAccess({
      tables,
      policies: { platform_b: { mode: "pairing", bindings: new Map(), pendingLimit: 6 } },
      directory: {
        lookup: async (oid) => (oid.toLowerCase() === PRINCIPAL ? { name: "Known", roles: [] } : undefined),
      },
      audit: createAuditLog(base),
    });
    const users = ["U0", "U1", "U2", "U3", "U4", "U5"];
    const codes = new Map<string, string>();
    for (const user of users) codes.set(user, (await challenge(svc, user)).code);
    const t = base("channelsenders");
    // 998 pairings made before the channel's counter existed (it starts from a listing)...
    for (let batch = 0; batch < 10; batch++)
      await t.submitTransaction(
        Array.from({ length: batch < 9 ? 100 : 98 }, (_, i) => [
          "create" as const,
          { partitionKey: "map_platform_b", rowKey: `filler${batch * 100 + i}`, principal_oid: PRINCIPAL },
        ]),
      );
    // ...then the 999th, alone; then five at once for the last place.
    await approve(svc, { vendorUserId: "U0", code: String(codes.get("U0")) });
    armed = true;
    const outcomes = await Promise.all(
      users.slice(1).map((user) =>
        approve(svc, { vendorUserId: user, code: String(codes.get(user)) }).then(
          () => "paired",
          (e: unknown) => (e instanceof PairingRefusedError ? e.reason : String(e)),
        ),
      ),
    );
    expect(arrived).toBe(parties);
    expect(outcomes.filter((o) => o === "paired")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "too_many_pairings")).toHaveLength(4);
    let rows = 0;
    for await (const row of t.listEntities({ queryOptions: { filter: "PartitionKey eq 'map_platform_b'" } }))
      if (String(row.rowKey) !== "paired_count") rows++;
    expect(rows).toBe(MAX_PAIRED_SENDERS);
    const resolved = [];
    for (const user of users)
      if ((await svc.access.resolve(turnOf(user), NOW)).status === "resolved") resolved.push(user);
    expect(resolved).toHaveLength(2);
    expect(resolved[0]).toBe("U0");
  });

  it("C-400 the principal being mapped cannot approve its own pairing; a Reader cannot approve", async () => {
    const { svc, audit } = service("pairing");
    const c = await challenge(svc, "U1");
    const self = { oid: `{${PRINCIPAL}}`, name: "Self", role: "Owner" as Role };
    expect(await refusal(approve(svc, { code: c.code, approver: self }))).toBe("separate_approver_required");
    expect(await refusal(approve(svc, { code: c.code, approver: { ...APPROVER, role: "Reader" } }))).toBe(
      "not_authorized",
    );
    const denied = await audit.list({ action: "channel.pairing_approve" });
    expect(denied.map((e) => e.outcome)).toEqual(["denied", "denied"]);
    expect(JSON.stringify(denied)).not.toContain(c.code);
  });

  it("C-402 pairing maps only to a principal the directory knows", async () => {
    const { svc } = service("pairing");
    const c = await challenge(svc, "U1");
    expect(await refusal(approve(svc, { code: c.code, principalOid: "bbbbbbbb-0000-0000-0000-000000000009" }))).toBe(
      "unknown_principal",
    );
  });

  it("C-403 a paired or bound sender cannot re-enroll to overwrite its mapping", async () => {
    const { svc } = service("pairing", { bindings: [["U9", PRINCIPAL]] });
    const c = await challenge(svc, "U1");
    await approve(svc, { code: c.code });
    // A mapped sender is resolved, so it is never challenged again ...
    expect((await svc.access.resolve(turnOf("U1"), NOW)).status).toBe("resolved");
    // ... and an approval for it is refused.
    expect(await refusal(approve(svc, { code: c.code }))).toBe("already_mapped");
    expect(await refusal(approve(svc, { vendorUserId: "U9", code: "AAAAAAAA" }))).toBe("already_mapped");
  });

  it("C-401 a code guessed 10,000 times: the challenge is gone after five wrong codes, the approver is stopped after twenty, and no refusal says which part was wrong", async () => {
    const { svc, audit } = service("pairing");
    const c = await challenge(svc, "U1");
    const reasons = new Set<string>();
    const messages = new Set<string>();
    let guesses = 0;
    for (let batch = 0; batch < 1000; batch++) {
      const outcomes = await Promise.all(
        Array.from({ length: 10 }, (_, i) => {
          const n = batch * 10 + i;
          const guess = `A${String(n).padStart(7, "0")}`;
          guesses++;
          return approve(svc, { code: guess === c.code ? "BBBBBBBB" : guess }).then(
            () => "accepted",
            (e: PairingRefusedError) => {
              messages.add(e.message);
              return e.reason;
            },
          );
        }),
      );
      for (const o of outcomes) reasons.add(o);
    }
    expect(guesses).toBe(10_000);
    expect([...reasons].sort()).toEqual(["invalid_or_expired_code", "too_many_attempts"]);
    expect(messages.size).toBe(2);
    // The real code no longer works, even for another approver: the challenge was deleted after PAIRING_MAX_FAILURES.
    expect(PAIRING_MAX_FAILURES).toBe(5);
    const other = { oid: "aaaaaaaa-0000-0000-0000-000000000002", name: "Other", role: "Owner" as Role };
    expect(await refusal(approve(svc, { code: c.code, approver: other }))).toBe("invalid_or_expired_code");
    // Only the attempts before the lock-out were audited.
    const audited = await audit.list({ action: "channel.pairing_approve", limit: 1000 });
    expect(audited.length).toBeLessThanOrEqual(APPROVER_MAX_FAILURES + 10 + 1);
    expect((await svc.access.resolve(turnOf("U1"), NOW)).status).toBe("challenge");
  }, 60_000);
});

describe("cross-channel identity links (spec §5 item 9)", () => {
  async function pairedBoth() {
    const s = service("pairing");
    const b = await challenge(s.svc, "U1", "platform_b");
    await approve(s.svc, { code: b.code });
    const a = await challenge(s.svc, "aad-1", "platform_a");
    await approve(s.svc, { channel: "platform_a", vendorUserId: "aad-1", code: a.code });
    return s;
  }
  const endpoints = [
    { channel: "platform_b" as const, vendorUserId: "U1" },
    { channel: "platform_a" as const, vendorUserId: "aad-1" },
  ] as [{ channel: ChannelKind; vendorUserId: string }, { channel: ChannelKind; vendorUserId: string }];

  it("C-405 C-410 C-411 two independently paired senders of different kinds are linked once, by a deterministic id, merging nothing", async () => {
    const { svc, audit } = await pairedBoth();
    const before = await audit.list();
    const link = await svc.approveLink({ endpoints, approver: APPROVER, requestId: "r", now: NOW });
    const again = await svc.approveLink({
      endpoints: [endpoints[1], endpoints[0]],
      approver: APPROVER,
      requestId: "r2",
      now: new Date(NOW.getTime() + 1000),
    });
    expect(again).toEqual(link);
    expect(link.link_id).toMatch(/^lnk_[0-9a-f]{24}$/);
    expect(await svc.listLinks()).toHaveLength(1);
    // Nothing merged: each sender still resolves to its own mapping; prior audit entries unchanged.
    expect(await svc.principalOf("platform_b", "U1")).toBe(PRINCIPAL.toUpperCase());
    const after = await audit.list();
    expect(after.slice(-before.length)).toEqual(before);
  });

  it("C-406 C-407 C-408 C-409 same-kind, self-approved, unpaired and cross-principal links are refused", async () => {
    const { svc } = await pairedBoth();
    expect(
      await refusal(
        svc.approveLink({
          endpoints: [endpoints[0], { channel: "platform_b", vendorUserId: "U2" }],
          approver: APPROVER,
          requestId: "r",
          now: NOW,
        }),
      ),
    ).toBe("same_channel_kind");
    expect(
      await refusal(
        svc.approveLink({
          endpoints,
          approver: { oid: PRINCIPAL, name: "Self", role: "Owner" },
          requestId: "r",
          now: NOW,
        }),
      ),
    ).toBe("separate_approver_required");
    expect(
      await refusal(
        svc.approveLink({
          endpoints: [endpoints[0], { channel: "platform_a", vendorUserId: "aad-unpaired" }],
          approver: APPROVER,
          requestId: "r",
          now: NOW,
        }),
      ),
    ).toBe("endpoint_not_paired");
  });

  it("C-409 senders paired to two different principals are not linked", async () => {
    const s = service("pairing");
    const other = "cccccccc-0000-0000-0000-000000000003";
    const svc = createSenderAccess({
      tables: s.tables,
      policies: {
        platform_b: { mode: "pairing", bindings: new Map(), pendingLimit: 3 },
        platform_a: { mode: "pairing", bindings: new Map(), pendingLimit: 3 },
      },
      directory: { lookup: async () => ({ name: "x", roles: [] }) },
      audit: s.audit,
    });
    const b = await challenge(svc, "U1", "platform_b");
    await approve(svc, { code: b.code });
    const a = await challenge(svc, "aad-1", "platform_a");
    await approve(svc, { channel: "platform_a", vendorUserId: "aad-1", code: a.code, principalOid: other });
    expect(await refusal(svc.approveLink({ endpoints, approver: APPROVER, requestId: "r", now: NOW }))).toBe(
      "different_principals",
    );
  });
});
