import { describe, expect, it } from "vitest";
import { OPTION_PROGRAMS } from "../../shared/blast/options.js";
import { dashboardSubmitSchema } from "../../shared/dashboard/schemas.js";
import { alignedFastaFileName, resultFileBase, resultFileName } from "../../shared/dashboard/result-file-names.js";
import { JOB_STATUSES } from "../../shared/jobs/model.js";
import { warmupNodeLines } from "../../web/src/pages/database-words.js";
import {
  finishedSentence,
  STATUS_FILTER,
  statusLabel,
  stepTimes,
  storingSentence,
} from "../../web/src/pages/job-words.js";
import { placeIssues } from "../../web/src/pages/submit-issues.js";
import {
  alignedRegionsFasta,
  alignmentBlocks,
  blockText,
  hspOrientation,
  hspStatistics,
} from "../../web/src/results/alignment.js";

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

  it("writes every job status with a capital, and the status filter explains the two hand-over states", () => {
    expect(JOB_STATUSES.map(statusLabel)).toEqual([
      "Queued",
      "Dispatching",
      "Submitting",
      "Running",
      "Completed",
      "Failed",
      "Cancelled",
    ]);
    expect(statusLabel("warm")).toBe("Warm");
    // The filter offers every status the list route filters by, each once.
    expect(STATUS_FILTER.map((f) => f.status).sort()).toEqual([...JOB_STATUSES].sort());
    for (const { status, label } of STATUS_FILTER) {
      expect(label.startsWith(statusLabel(status)), status).toBe(true);
      if (status === "submitting" || status === "dispatching") expect(label, status).toMatch(/\(.+\)$/);
      else expect(label).toBe(statusLabel(status));
    }
  });

  it("times every timeline step from the statuses the dashboard kept, so a reloaded page shows them all", () => {
    const job = {
      created_at: "2026-11-27T10:00:00.000Z",
      status_times: {
        submitting: "2026-11-27T10:00:00.000Z",
        queued: "2026-11-27T10:00:02.000Z",
        running: "2026-11-27T10:00:09.000Z",
        dispatching: "2026-11-27T10:00:05.000Z",
        completed: "2026-11-27T10:01:00.000Z",
      },
    };
    expect(stepTimes(job)).toEqual({
      accepted: "2026-11-27T10:00:00.000Z",
      queued: "2026-11-27T10:00:02.000Z",
      running: "2026-11-27T10:00:05.000Z",
      finished: "2026-11-27T10:01:00.000Z",
    });
    // A job stored before the times were kept: only the submit's time is known.
    expect(stepTimes({ created_at: job.created_at })).toEqual({ accepted: job.created_at });
  });
});

describe("download names and warm-up progress (issue 23, items 8 and 9)", () => {
  it("names downloads <title or job>-<kind>.<ext>, the title made safe for a header and a file system", () => {
    const job = { job_id: "0b5c8f7e-1111-4222-8333-444455556666", title: "" };
    expect(resultFileName(job, "xml")).toBe(`${job.job_id}-results.xml`);
    expect(resultFileName({ ...job, title: "  ../../etc/passwd  " }, "tabular")).toBe("etc-passwd-hits.tsv");
    expect(resultFileName({ ...job, title: '"quoted"\r\nX-Injected: 1' }, "merged")).toBe(
      "quoted-X-Injected-1-merged.zip",
    );
    expect(resultFileName({ ...job, title: "日本語" }, "full")).toBe(`${job.job_id}-shards.zip`);
    expect(resultFileBase({ ...job, title: "a".repeat(300) })).toHaveLength(80);
    expect(alignedFastaFileName("run-7", 12)).toBe("run-7-query12-aligned.fasta");
  });

  it("lists a cluster warm-up's nodes with their bytes, and nothing for a local warm-up", () => {
    expect(
      warmupNodeLines({
        nodes: [
          { node: "aks-blast-0", state: "running", bytes_done: 1_200_000_000, bytes_total: 3_400_000_000 },
          { node: "aks-blast-1", state: "failed", bytes_done: 0, bytes_total: 3_400_000_000, error: "pull\nENOSPC" },
        ],
      }),
    ).toEqual(["aks-blast-0: running, 1.2 GB of 3.4 GB", "aks-blast-1: failed, 0 B of 3.4 GB — ENOSPC"]);
    expect(warmupNodeLines(undefined)).toEqual([]);
    expect(warmupNodeLines({ nodes: [{ node: 1 }] })).toEqual([]);
  });
});

type Hsp = Parameters<typeof alignmentBlocks>[1];

function hsp(over: Partial<Hsp>): Hsp {
  return {
    num: 1,
    bit_score: 200,
    score: 110,
    evalue: 1e-50,
    query_from: 1,
    query_to: 60,
    hit_from: 1,
    hit_to: 60,
    query_frame: null,
    hit_frame: null,
    query_strand: null,
    hit_strand: null,
    identity: 60,
    positive: 60,
    gaps: 0,
    align_len: 60,
    qseq: "A".repeat(60),
    midline: "|".repeat(60),
    hseq: "A".repeat(60),
    ...over,
  };
}

describe("alignment view and FASTA of aligned regions (issue 23, item 4)", () => {
  it("cuts an alignment into blocks of 60 with each line's coordinates: gaps take no coordinate, a minus-strand subject counts down", () => {
    const blastn = hsp({
      qseq: `${"A".repeat(59)}-${"C".repeat(70)}`,
      midline: `${"|".repeat(59)} ${"|".repeat(70)}`,
      hseq: "G".repeat(130),
      query_from: 1,
      query_to: 129,
      hit_from: 500,
      hit_to: 371,
      query_strand: "plus",
      hit_strand: "minus",
      align_len: 130,
      identity: 129,
      gaps: 1,
    });
    const blocks = alignmentBlocks("blastn", blastn);
    expect(blocks.map((b) => [b.query.start, b.query.end, b.hit.start, b.hit.end])).toEqual([
      [1, 59, 500, 441],
      [60, 119, 440, 381],
      [120, 129, 380, 371],
    ]);
    expect(blocks.map((b) => b.query.text.length)).toEqual([60, 60, 10]);
    // The three lines of a block line up: the letters start in the same column.
    const [q, m, s] = blockText(blocks[1] as (typeof blocks)[number]).split("\n");
    expect(q).toMatch(/^Query {2}60 {3}C/);
    expect(s).toMatch(/^Sbjct {2}440 {2}G/);
    expect(q?.indexOf("C")).toBe(s?.indexOf("G"));
    expect(m?.indexOf("|")).toBe(q?.indexOf("C"));
    expect(q?.endsWith("  119")).toBe(true);
    expect(hspOrientation(blastn)).toBe("Strand Plus/Minus");
    expect(hspStatistics("blastn", blastn)).toEqual(["Identities 129/130 (99%)", "Gaps 1/130 (1%)"]);
  });

  it("counts three letters per residue on a translated side, down from the larger coordinate in a negative frame", () => {
    const blastx = hsp({ query_from: 10, query_to: 189, query_frame: -2, query_strand: "minus" });
    expect(alignmentBlocks("blastx", blastx).map((b) => [b.query.start, b.query.end, b.hit.start, b.hit.end])).toEqual([
      [189, 10, 1, 60],
    ]);
    expect(hspOrientation(blastx)).toBe("Frame -2");
    expect(hspStatistics("blastx", blastx)).toContain("Positives 60/60 (100%)");
    const tblastn = hsp({ hit_from: 100, hit_to: 279, hit_frame: 1, hit_strand: "plus" });
    expect(alignmentBlocks("tblastn", tblastn)[0]?.hit).toMatchObject({ start: 100, end: 279 });
    expect(hspOrientation(hsp({ query_frame: 1, hit_frame: -3 }))).toBe("Frame +1/-3");
    expect(hspOrientation(hsp({}))).toBe("");
  });

  it("writes one FASTA record per HSP of each chosen hit: the subject's aligned letters without gaps, named by accession and range", () => {
    const fasta = alignedRegionsFasta([
      {
        hit: {
          num: 1,
          id: "gb|U20776.2|",
          accession: "U20776",
          title: "Thermotoga 16S",
          len: 1500,
          hsps: 2,
          evalue: 0,
          bit_score: 200,
          total_bit_score: 300,
          query_cover: 90,
          identity: 99,
          hsp_spans: [],
        },
        hsp_list: [
          hsp({ hseq: `${"A".repeat(50)}--${"C".repeat(30)}`, hit_from: 11, hit_to: 90 }),
          hsp({ num: 2, hseq: "GGTT", hit_from: 400, hit_to: 397, hit_strand: "minus" }),
        ],
      },
    ]);
    expect(fasta).toBe(
      `>U20776:11-90 Thermotoga 16S\n${"A".repeat(50)}${"C".repeat(10)}\n${"C".repeat(20)}\n>U20776:c400-397 Thermotoga 16S\nGGTT\n`,
    );
    expect(alignedRegionsFasta([])).toBe("");
  });
});

describe("job page while the results are stored (issue 23, storing progress)", () => {
  it("says how much of the merged result is stored, of how much when known, instead of 'running, 0 of 1 done'", () => {
    expect(
      storingSentence({ xml_bytes: 1_200_000_000, xml_bytes_total: 3_300_000_000, total_is_estimate: false }),
    ).toBe("BLAST has finished. Merging and storing the results: 1.2 GB of 3.3 GB.");
    expect(storingSentence({ xml_bytes: 1_200_000_000, xml_bytes_total: 6_600_000_000, total_is_estimate: true })).toBe(
      "BLAST has finished. Merging and storing the results: 1.2 GB so far (at most 6.6 GB).",
    );
    expect(storingSentence({ xml_bytes: 250_000, xml_bytes_total: null, total_is_estimate: true })).toBe(
      "BLAST has finished. Merging and storing the results: 250 KB so far.",
    );
  });
});
