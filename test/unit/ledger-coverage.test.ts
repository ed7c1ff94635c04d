import { describe, expect, it } from "vitest";
import { citationsIn, ledgerCoverage, parseLedger, testTitles } from "../../scripts/ledger-coverage.mjs";

const LEDGER = `# Requirements ledger

Sources:
- Part Y: \`yard.md\` (a made-up spec: its prefixes are not the real ledger's), ids \`Y-nnn\`.
- Part Z: \`zone.md\` (another made-up spec), ids \`Z-nnn\`.

## Y §2.3 Submit acceptance response (202)

| id | requirement | spec ref | how a black-box test would show it |
|---|---|---|---|
| Y-060 | An accepted \`POST /v1/jobs\` returns HTTP 202. | §2.3 | Valid submit → 202 |
| Y-061 | The 202 body has \`job_id\`. | §2.3 | Field present |
| Y-062 | The 202 body has \`status\` equal to \`queued\`. | §2.3 | queued |

## Z §7 Errors

| id | requirement | spec ref | how a black-box test would show it |
|---|---|---|---|
| Z-487 | An error. | §7 | 4xx |

# Counts
Y-060 is mentioned here outside a table and is not a row.
`;

describe("ledger coverage script (npm run ledger)", () => {
  it("reads the ledger's rows with their section and spec document", () => {
    expect(parseLedger(LEDGER)).toEqual([
      { id: "Y-060", section: "Y §2.3 Submit acceptance response (202)", document: "yard.md" },
      { id: "Y-061", section: "Y §2.3 Submit acceptance response (202)", document: "yard.md" },
      { id: "Y-062", section: "Y §2.3 Submit acceptance response (202)", document: "yard.md" },
      { id: "Z-487", section: "Z §7 Errors", document: "zone.md" },
    ]);
  });

  it("finds the titles of it, test and describe calls (with modifiers), in any quote style", () => {
    const source = [
      'describe("outer Y-001", () => {',
      "  it('single Y-002', () => {});",
      "  it.concurrent(`template Y-003`, async () => {});",
      '  test.each([1, 2])("each %s Y-004", () => {});',
      '  const notATitle = split("Y-005");',
      "});",
    ].join("\n");
    expect(testTitles(source)).toEqual(["outer Y-001", "single Y-002", "template Y-003", "each %s Y-004"]);
  });

  it("counts each named id once, and a range as citing neither end", () => {
    expect(citationsIn("Y-060 Y-061 Y-060 accepts")).toEqual({ ids: ["Y-060", "Y-061"], ranges: [] });
    expect(citationsIn("Y-060..Y-070 Y-033 accepts")).toEqual({ ids: ["Y-033"], ranges: ["Y-060..Y-070"] });
    expect(citationsIn("Y-105…Y-123 envelope").ids).toEqual([]);
    expect(citationsIn("Y-142–Y-150 states").ids).toEqual([]);
  });

  it("reports per document how many rows titles cite, lists the uncited ones, and flags ids of its documents that it lacks", () => {
    const files = [
      { file: "test/a.test.ts", source: 'it("Y-060 Y-062 Y-999 accepts", () => {});' },
      { file: "test/b.test.ts", source: 'it("Y-060..Y-062 fields", () => {});' },
      // Another document's prefix is none of this ledger's business.
      { file: "test/c.test.ts", source: 'it("Q-001 Q-002..Q-009 elsewhere", () => {});' },
    ];
    const report = ledgerCoverage(parseLedger(LEDGER), files);
    expect(report.documents.map((d) => [d.document, d.cited, d.total])).toEqual([
      ["yard.md", 2, 3],
      ["zone.md", 0, 1],
    ]);
    expect(report.documents[0]?.uncited.map((row) => row.id)).toEqual(["Y-061"]);
    expect(report.unknown).toEqual(["Y-999"]);
    expect(report.ranges).toEqual([{ file: "test/b.test.ts", range: "Y-060..Y-062" }]);
  });
});
