import { describe, expect, it } from "vitest";
import { createJobApiRoutes, type JobApiDeps } from "../../jobapi/app.js";
import { buildOpenApiDocument } from "../../jobapi/openapi.js";
import { blastOptionsSchema, SCORING_MATRICES } from "../../shared/blast/options.js";

type PropertySchema = { enum?: unknown[]; pattern?: string; type?: string };

const doc = buildOpenApiDocument(createJobApiRoutes({ config: { bodyLimitBytes: 1024 } } as unknown as JobApiDeps)) as {
  components: {
    schemas: Record<string, { properties: Record<string, { properties: Record<string, PropertySchema> }> }>;
  };
};
const described = doc.components.schemas.SubmitRequest?.properties.blast_options?.properties ?? {};

const accepts = (key: string, value: unknown) => blastOptionsSchema.safeParse({ [key]: value }).success;

/** Values near an enumerated option's members: other cases, neighbours, padding, look-alikes. */
function nearMisses(values: readonly unknown[]): unknown[] {
  const out: unknown[] = ["", " ", "none", "ΒLOSUM62", null, true, 0, -1, 1.5, 1e9];
  for (const v of values) {
    const s = String(v);
    out.push(s.toLowerCase(), s.toUpperCase(), `${s} `, ` ${s}`, `${s}x`, s.slice(0, -1), `${s}\u0000`);
    if (typeof v === "number") out.push(String(v), v + 1, v - 1);
  }
  return out;
}

describe("openapi.json describes every enumerated option exactly as the validator accepts it", () => {
  const enumerated = Object.entries(described).filter(([, s]) => s.enum !== undefined || s.pattern !== undefined);

  it("covers matrix, task, strand, outfmt and the genetic codes", () => {
    expect(enumerated.map(([k]) => k)).toEqual(
      expect.arrayContaining(["matrix", "task", "strand", "outfmt", "query_gencode", "db_gencode"]),
    );
  });

  it("each listed value is accepted, and each near miss is accepted only if the description admits it", () => {
    for (const [key, schema] of enumerated) {
      const members = schema.enum ?? (key === "matrix" ? [...SCORING_MATRICES] : []);
      for (const value of members) expect(accepts(key, value), `${key}=${JSON.stringify(value)}`).toBe(true);
      for (const value of nearMisses(members)) {
        const admitted = schema.enum
          ? schema.enum.includes(value)
          : typeof value === "string" && new RegExp(schema.pattern as string).test(value);
        expect(accepts(key, value), `${key}=${JSON.stringify(value)}`).toBe(admitted);
      }
    }
  });

  it("matrix: every spelling the pattern admits is accepted, in any letter case", () => {
    expect(accepts("matrix", "bLoSuM62")).toBe(true);
    expect(new RegExp(described.matrix?.pattern as string).test("bLoSuM62")).toBe(true);
    expect(accepts("matrix", "BLOSUM63")).toBe(false);
  });
});
