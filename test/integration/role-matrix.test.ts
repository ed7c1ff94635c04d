import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";

const ROLES = ["Reader", "Contributor", "Approver", "Owner"] as const;
type Role = (typeof ROLES)[number];
const RANK: Record<Role, number> = { Reader: 0, Contributor: 1, Approver: 2, Owner: 3 };

const UNKNOWN_UUID = "00000000-0000-4000-8000-000000000000";
const UNKNOWN_OP = `op-${"0".repeat(32)}`;

/**
 * Every dashboard route with its role floor. Bodies and ids are chosen so a caller who passes the
 * floor gets one definite answer without starting real work (an invalid body → 422, an unknown id → 404,
 * no workspace saved yet → 404, prepare without a release source → 503): one status per cell.
 */
const MATRIX: { method: string; path: string; floor: Role; body?: unknown; passes: [number] }[] = [
  { method: "GET", path: "/api/blast/jobs", floor: "Reader", passes: [200] },
  { method: "POST", path: "/api/blast/jobs", floor: "Contributor", body: { program: "nope" }, passes: [422] },
  { method: "GET", path: `/api/blast/jobs/${UNKNOWN_UUID}`, floor: "Reader", passes: [404] },
  { method: "DELETE", path: `/api/blast/jobs/${UNKNOWN_UUID}`, floor: "Contributor", passes: [404] },
  { method: "GET", path: `/api/blast/jobs/${UNKNOWN_UUID}/results?content=xml`, floor: "Reader", passes: [404] },
  {
    method: "POST",
    path: `/api/blast/jobs/${UNKNOWN_UUID}/results/ticket?content=xml`,
    floor: "Reader",
    passes: [404],
  },
  { method: "GET", path: `/api/operations/${UNKNOWN_OP}`, floor: "Reader", passes: [404] },
  { method: "GET", path: "/api/workspace", floor: "Reader", passes: [404] },
  { method: "PUT", path: "/api/workspace", floor: "Contributor", body: { node_count: "many" }, passes: [422] },
  { method: "GET", path: "/api/settings/api-token", floor: "Reader", passes: [200] },
  { method: "POST", path: "/api/settings/api-token/reveal", floor: "Owner", passes: [200] },
  { method: "GET", path: "/api/databases", floor: "Reader", passes: [200] },
  { method: "POST", path: "/api/databases/16s_rrna_demo/warmup", floor: "Contributor", passes: [200] },
  { method: "POST", path: "/api/databases/no_such_db/prepare", floor: "Contributor", passes: [503] },
  { method: "GET", path: "/api/databases/adding", floor: "Reader", passes: [200] },
  { method: "POST", path: "/api/databases/uploads?name=x&type=dna", floor: "Contributor", passes: [422] },
];

let stack: TestStack;
const tokens = new Map<Role, string>();

beforeAll(async () => {
  // No release source, whatever the caller's shell exports: prepare answers 503 for every role that passes.
  stack = await startStack({ env: { DATABASE_SOURCE_URL: "" } });
  for (const role of ROLES) tokens.set(role, await mintToken(stack, role));
});

afterAll(async () => {
  await stack?.stop();
  stack?.cleanup();
});

describe("role matrix: every dashboard route × every role (README table)", () => {
  for (const row of MATRIX) {
    it(`B-158 ${row.method} ${row.path}: no token 401, below ${row.floor} 403, ${row.floor} and above pass`, async () => {
      const call = (token?: string) =>
        fetch(`${stack.info.functions_url}${row.path}`, {
          method: row.method,
          headers: {
            ...(token ? { Authorization: `Bearer ${token}` } : {}),
            ...(row.body ? { "Content-Type": "application/json" } : {}),
          },
          body: row.body === undefined ? undefined : JSON.stringify(row.body),
        });
      expect((await call()).status).toBe(401);
      for (const role of ROLES) {
        const res = await call(tokens.get(role));
        if (RANK[role] < RANK[row.floor]) {
          expect(res.status, `${role}`).toBe(403);
          expect(await res.json()).toMatchObject({
            detail: expect.stringContaining(row.floor),
            request_id: expect.any(String),
          });
        } else {
          expect(res.status, `${role}`).toBe(row.passes[0]);
        }
      }
    });
  }

  it("GET /api/me answers any valid token, whatever its roles", async () => {
    for (const role of ROLES)
      expect(
        (
          await fetch(`${stack.info.functions_url}/api/me`, {
            headers: { Authorization: `Bearer ${tokens.get(role)}` },
          })
        ).status,
      ).toBe(200);
  });
});
