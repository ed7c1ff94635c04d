import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { dashboardJobId, legacyDashboardJobId } from "../../shared/dashboard/dashboard-job-id.js";

const OID = "00000000-0000-0000-0000-0000000000aa";
/** Version nibble and variant bits of an RFC 9562 UUID. */
const layout = (uuid: string) => ({ version: uuid[14], variant: Number.parseInt(uuid[19] as string, 16) >> 2 });

describe("dashboard job ids", () => {
  it("names a keyed job with an RFC 9562 version 8 UUID built from SHA-256 of the caller and key", () => {
    const id = dashboardJobId(OID, "my-run-1");
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(layout(id)).toEqual({ version: "8", variant: 0b10 });
    // Every other bit is the hash's: the first 128 bits of SHA-256("<oid>\n<key>").
    const hash = createHash("sha256").update(`${OID}\nmy-run-1`).digest("hex").slice(0, 32);
    const bits = id.replaceAll("-", "");
    expect(bits.slice(0, 12)).toBe(hash.slice(0, 12));
    expect(bits.slice(13, 16)).toBe(hash.slice(13, 16));
    expect(Number.parseInt(bits.slice(16, 18), 16) & 0x3f).toBe(Number.parseInt(hash.slice(16, 18), 16) & 0x3f);
    expect(bits.slice(18)).toBe(hash.slice(18));
  });

  it("gives the same caller and key the same id, for good, and any other pair another", () => {
    expect(dashboardJobId(OID, "my-run-1")).toBe("b3d9da07-5843-869c-8320-34fcff5564f7");
    expect(dashboardJobId(OID, "my-run-2")).not.toBe(dashboardJobId(OID, "my-run-1"));
    expect(dashboardJobId("another-oid", "my-run-1")).not.toBe(dashboardJobId(OID, "my-run-1"));
  });

  it("keeps the legacy id of jobs created before version 8: the same bits labelled version 5", () => {
    // Computed by the earlier code, which set version nibble 5 on SHA-256 bits.
    expect(legacyDashboardJobId(OID, "my-run-1")).toBe("b3d9da07-5843-569c-8320-34fcff5564f7");
    expect(legacyDashboardJobId("oid-b", "dash-retry-1")).toBe("4efcadb3-bfe3-502c-b5da-3ad069324833");
    expect(legacyDashboardJobId(OID, "my-run-1")).not.toBe(dashboardJobId(OID, "my-run-1"));
  });

  it("gives a job without a key a random (version 4) UUID", () => {
    const first = dashboardJobId(OID, undefined);
    expect(layout(first)).toEqual({ version: "4", variant: 0b10 });
    expect(dashboardJobId(OID, undefined)).not.toBe(first);
  });
});
