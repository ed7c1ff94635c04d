import { describe, expect, it } from "vitest";
import { OPTION_PROGRAMS } from "../../shared/blast/options.js";
import { dashboardSubmitSchema } from "../../shared/dashboard/schemas.js";
import { finishedSentence } from "../../web/src/pages/job-words.js";
import { placeIssues } from "../../web/src/pages/submit-issues.js";

const label = (key: string) => (key === "evalue" ? "E-value threshold" : undefined);

describe("New search page: where each refusal is shown (issue 23, defect 3)", () => {
  it("puts a refusal next to a field the form shows, and one for a field it lacks at the top, naming the field", () => {
    const placed = placeIssues(
      [
        { loc: ["body", "db"], msg: "unknown database 'x'", type: "value_error" },
        { loc: ["body", "query_fasta", 2], msg: "record 3 is empty", type: "value_error" },
        { loc: ["body", "options", "evalue"], msg: "must be > 0", type: "value_error" },
        { loc: ["body", "options", "matrix"], msg: "not an option of blastn", type: "value_error" },
        { loc: ["body", "options", "evalue"], msg: "again", type: "value_error" },
        { loc: ["body", "idempotency_key"], msg: "1–200 printable ASCII characters", type: "value_error" },
        { loc: ["body", "surprise"], msg: "unknown field 'surprise'", type: "extra_forbidden" },
        { loc: ["body"], msg: "field required", type: "missing" },
      ],
      new Set(["db", "query_fasta", "options.evalue"]),
      label,
    );
    expect(placed.byField).toEqual({
      db: ["unknown database 'x'"],
      query_fasta: ["record 3 is empty"],
      "options.evalue": ["must be > 0", "again"],
    });
    expect(placed.top).toEqual([
      "BLAST option 'matrix': not an option of blastn",
      "The request's idempotency key (sent by the page): 1–200 printable ASCII characters",
      "Field 'surprise': unknown field 'surprise'",
      "The request: field required",
    ]);
  });

  it("shows every field of the submit schema and every BLAST option somewhere, whatever the form shows", () => {
    const locs: (string | number)[][] = [
      ...Object.keys(dashboardSubmitSchema.shape).map((key) => ["body", key]),
      ...Object.keys(OPTION_PROGRAMS).map((key) => ["body", "options", key]),
    ];
    for (const shown of [new Set<string>(), new Set(["program", "db", "options.evalue"])]) {
      const placed = placeIssues(
        locs.map((loc) => ({ loc, msg: `refused ${loc.join(".")}`, type: "value_error" })),
        shown,
        label,
      );
      const visible = [...Object.values(placed.byField).flat(), ...placed.top].join("\n");
      for (const loc of locs) expect(visible).toContain(`refused ${loc.join(".")}`);
      expect(Object.keys(placed.byField).every((key) => shown.has(key))).toBe(true);
    }
  });
});

describe("job page words (issue 23, item 8)", () => {
  it("says 'The search was cancelled.' and a sentence for each other end", () => {
    expect(finishedSentence("cancelled")).toBe("The search was cancelled.");
    expect(finishedSentence("completed")).toBe("The search has completed.");
    expect(finishedSentence("failed")).toBe("The search failed.");
  });
});
