/**
 * Issue 22 item 9: one canonical JSON with RFC 8785 semantics. The property: a value and its JSON
 * round trip hash equally, so an approval's `action_hash` survives storage (it did not when an
 * undefined field was written as `"k":undefined`).
 */
import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../shared/canonical-json.js";
import { actionHash } from "../../shared/console/approvals/approval-store.js";
import { canonicalJson as fingerprintJson } from "../../shared/http/idempotency.js";

const hash = (value: unknown) => createHash("sha256").update(canonicalJson(value)).digest("hex");

/** Values with everything JSON treats specially: undefined, dates, non-finite numbers, -0, boxed values, odd keys. */
const { value } = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.constant(undefined),
    fc.boolean(),
    fc.double(),
    fc.integer(),
    fc.constantFrom(-0, Number.NaN, Number.POSITIVE_INFINITY, 1e21, 5e-324, 0.1 + 0.2),
    fc.string({ unit: "grapheme-composite" }),
    fc.string({ unit: "binary" }),
    fc.date({ noInvalidDate: true }),
    fc.constantFrom(new Number(3), new String("s"), new Boolean(false)),
    fc.constant(() => 1),
    fc.array(tie("value"), { maxLength: 5 }),
    fc.dictionary(fc.string({ unit: "binary", maxLength: 6 }), tie("value"), { maxKeys: 6 }),
  ),
}));
const container = fc.oneof(
  fc.array(value, { maxLength: 6 }),
  fc.dictionary(fc.string({ unit: "binary", maxLength: 6 }), value, { maxKeys: 8 }),
);

describe("canonical JSON (RFC 8785 semantics)", () => {
  it("hash(x) == hash(JSON.parse(JSON.stringify(x))) for any value", () => {
    fc.assert(
      fc.property(container, (x) => {
        expect(hash(x)).toBe(hash(JSON.parse(JSON.stringify(x))));
      }),
      { numRuns: 3000 },
    );
  });

  it("is valid JSON that parses to what JSON.stringify keeps, with keys in UTF-16 code-unit order", () => {
    fc.assert(
      fc.property(container, (x) => {
        const text = canonicalJson(x);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(x)));
        // Canonical text is a fixed point.
        expect(canonicalJson(JSON.parse(text))).toBe(text);
      }),
      { numRuns: 1000 },
    );
  });

  it("an approval's action_hash is the same after a JSON round trip of its action (undefined fields included)", () => {
    const action = {
      action_type: "scale_node_pool",
      target: "node_pool/blast",
      params: { node_count: 3, note: undefined },
    };
    expect(actionHash(action)).toBe(actionHash(JSON.parse(JSON.stringify(action))));
    fc.assert(
      fc.property(fc.dictionary(fc.string({ maxLength: 8 }), value, { maxKeys: 5 }), (params) => {
        const a = { action_type: "kill_switch", target: "control_plane", params: params as Record<string, unknown> };
        expect(actionHash(a)).toBe(actionHash(JSON.parse(JSON.stringify(a))));
      }),
    );
  });

  it("RFC 8785 number and ordering examples; one implementation behind both names", () => {
    expect(canonicalJson([1e21, 1e-7, -0, 0.000001, 333333333.3333333, 4.5])).toBe(
      "[1e+21,1e-7,0,0.000001,333333333.3333333,4.5]",
    );
    expect(canonicalJson({ b: [undefined, () => 1], a: new Date(0) })).toBe(
      '{"a":"1970-01-01T00:00:00.000Z","b":[null,null]}',
    );
    expect(fingerprintJson).toBe(canonicalJson);
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson({ n: 1n })).toThrow(TypeError);
  });
});
