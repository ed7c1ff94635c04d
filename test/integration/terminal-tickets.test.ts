import { createHash, randomUUID } from "node:crypto";
import { odata, TableClient } from "@azure/data-tables";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import {
  createTerminalTicketStore,
  TERMINAL_TICKET_TABLE,
  TerminalTicketRefusedError,
} from "../../shared/terminal/terminal-tickets.js";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";

// One stack for the file: the dashboard issues tickets into its Azurite, the store redeems them there.
const ROLES = ["Reader", "Contributor", "Approver", "Owner"] as const;
type Who = "none" | (typeof ROLES)[number];
const ORIGIN = "http://127.0.0.1:4280";

let stack: TestStack;
let connectionString: string;
const bearer = new Map<Who, string>();

function identity(role: string): { oid: string; name: string } {
  const n = (ROLES as readonly string[]).indexOf(role) + 1;
  return { oid: `0000000${n}-aaaa-4bbb-8ccc-eeeeeeeeeeee`, name: `Terminal ${role}` };
}

beforeAll(async () => {
  stack = await startStack();
  connectionString = `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`;
  for (const role of ROLES) bearer.set(role, await mintToken(stack, role, identity(role)));
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

interface Call {
  who?: Who;
  body?: string;
  headers?: Record<string, string>;
  requestId?: string;
}

async function requestTicket(
  options: Call = {},
): Promise<{ status: number; body: Record<string, unknown>; res: Response }> {
  const headers: Record<string, string> = {
    "X-Request-Id": options.requestId ?? `test-${randomUUID()}`,
    "Content-Type": "application/json",
    Origin: ORIGIN,
    ...options.headers,
  };
  const token = options.who && options.who !== "none" ? bearer.get(options.who) : undefined;
  if (token) headers.Authorization = `Bearer ${token}`;
  const res = await fetch(`${stack.info.functions_url}/api/terminal/tickets`, {
    method: "POST",
    headers,
    body: options.body ?? "{}",
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown>, res };
}

function table(name: string): TableClient {
  return TableClient.fromConnectionString(connectionString, name, { allowInsecureConnection: true });
}

async function audits(requestId: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const e of table("audit").listEntities<Record<string, unknown>>({
    queryOptions: { filter: odata`request_id eq ${requestId}` },
  }))
    out.push(e);
  return out;
}

describe("POST /api/terminal/tickets", () => {
  it("B-171 refuses a caller without a bearer token (401, envelope)", async () => {
    const requestId = `test-${randomUUID()}`;
    const { status, body } = await requestTicket({ who: "none", requestId });
    expect(status).toBe(401);
    expect(body).toEqual({ detail: expect.any(String), request_id: requestId });
  });

  it("B-171 refuses a forged bearer token (401)", async () => {
    const { status } = await requestTicket({ headers: { Authorization: "Bearer not.a.token" } });
    expect(status).toBe(401);
  });

  it("B-172 refuses a Reader (403: Readers get no terminal) and audits the refusal as denied", async () => {
    const requestId = `test-${randomUUID()}`;
    const { status, body } = await requestTicket({ who: "Reader", requestId });
    expect(status).toBe(403);
    expect(body).toEqual({ detail: expect.stringContaining("Contributor"), request_id: requestId });
    const rows = await audits(requestId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      action: "terminal.ticket",
      outcome: "denied",
      actor_oid: identity("Reader").oid,
      actor_name: "Terminal Reader",
    });
  });

  it("refuses a Reader before reading the body (403, not 422)", async () => {
    const { status } = await requestTicket({ who: "Reader", body: '{"shell":"/bin/sh"}' });
    expect(status).toBe(403);
  });

  it("answers 422 with loc/msg/type for an unknown field, 400 for malformed JSON or a wrong content type", async () => {
    const unknown = await requestTicket({ who: "Contributor", body: '{"shell":"/bin/sh"}' });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toEqual([
      expect.objectContaining({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) }),
    ]);
    expect((await requestTicket({ who: "Contributor", body: "{" })).status).toBe(400);
    const wrongType = await requestTicket({ who: "Contributor", headers: { "Content-Type": "text/plain" } });
    expect(wrongType.status).toBe(400);
  });

  it("answers 400 without an Origin header, or with an opaque or non-origin one", async () => {
    for (const origin of ["", "null", "http://127.0.0.1:4280/path", "file:///etc"]) {
      const { status, body } = await requestTicket({ who: "Contributor", headers: { Origin: origin } });
      expect(status, origin).toBe(400);
      expect(String(body.detail)).toContain("Origin");
    }
  });

  it("issues a single-use ticket to a Contributor, stores only its digest, answers no-store and audits it", async () => {
    const requestId = `test-${randomUUID()}`;
    const { status, body, res } = await requestTicket({ who: "Contributor", requestId });
    expect(status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(body).toEqual({
      ticket: expect.stringMatching(/^bptt_[A-Za-z0-9_-]{43}$/),
      expires_at: expect.any(String),
      expires_in_seconds: 30,
      meta: { request_id: requestId },
    });
    const ticket = String(body.ticket);
    const expiresIn = new Date(String(body.expires_at)).getTime() - Date.now();
    expect(expiresIn).toBeGreaterThan(0);
    expect(expiresIn).toBeLessThanOrEqual(30_000);

    // The table holds the digest as the key and never the ticket.
    const rows: Record<string, unknown>[] = [];
    for await (const e of table(TERMINAL_TICKET_TABLE).listEntities<Record<string, unknown>>()) rows.push(e);
    const digest = createHash("sha256").update(ticket).digest("hex");
    const row = rows.find((r) => r.partitionKey === digest);
    expect(row).toMatchObject({ oid: identity("Contributor").oid, origin: ORIGIN, used_at: "" });
    expect(JSON.stringify(rows)).not.toContain(ticket);
    expect(JSON.stringify(rows)).not.toContain(ticket.slice(5));

    // Audited with who and the origin, never the ticket.
    const entries = await audits(requestId);
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      action: "terminal.ticket",
      outcome: "succeeded",
      actor_oid: identity("Contributor").oid,
    });
    expect(JSON.stringify(entries)).not.toContain(ticket.slice(5));
    expect(stack.output()).not.toContain(ticket.slice(5));

    // Redeemed once from its origin; the second redemption is refused as used.
    const store = createTerminalTicketStore(connectionString);
    expect(await store.redeem(ticket, ORIGIN)).toEqual({ oid: identity("Contributor").oid, origin: ORIGIN });
    await expect(store.redeem(ticket, ORIGIN)).rejects.toMatchObject({ reason: "used" });
  });

  it("issues to every role above Reader", async () => {
    for (const role of ["Approver", "Owner"] as const) {
      expect((await requestTicket({ who: role })).status).toBe(201);
    }
  });
});

describe("redeeming a ticket (the job API's side of the same storage)", () => {
  async function issued(): Promise<string> {
    const { status, body } = await requestTicket({ who: "Contributor" });
    expect(status).toBe(201);
    return String(body.ticket);
  }

  it("refuses no ticket, a malformed one and an unknown one", async () => {
    const store = createTerminalTicketStore(connectionString);
    await expect(store.redeem(undefined, ORIGIN)).rejects.toMatchObject({ reason: "missing" });
    await expect(store.redeem("bptt_short", ORIGIN)).rejects.toMatchObject({ reason: "malformed" });
    await expect(store.redeem(`bptt_${"A".repeat(43)}`, ORIGIN)).rejects.toMatchObject({ reason: "unknown" });
  });

  it("refuses an expired ticket", async () => {
    const ticket = await issued();
    const later = createTerminalTicketStore(connectionString, { now: () => new Date(Date.now() + 31_000) });
    const refusal = await later.redeem(ticket, ORIGIN).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(TerminalTicketRefusedError);
    expect(refusal).toMatchObject({ reason: "expired" });
  });

  it("refuses a ticket presented from another origin, and burns it", async () => {
    const ticket = await issued();
    const store = createTerminalTicketStore(connectionString);
    await expect(store.redeem(ticket, "https://evil.example")).rejects.toMatchObject({ reason: "origin_mismatch" });
    await expect(store.redeem(ticket, ORIGIN)).rejects.toMatchObject({ reason: "used" });
  });

  it("lets exactly one of many concurrent redemptions win", async () => {
    const ticket = await issued();
    const store = createTerminalTicketStore(connectionString);
    const results = await Promise.allSettled(Array.from({ length: 8 }, () => store.redeem(ticket, ORIGIN)));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results.filter((r) => r.status === "rejected")) {
      expect((r as PromiseRejectedResult).reason).toMatchObject({ reason: "used" });
    }
  });
});
