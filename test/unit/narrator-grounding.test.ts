import { describe, expect, it } from "vitest";
import { findConflicts } from "../../shared/console/narrators/conflicts.js";
import {
  normalizeText,
  numbersIn,
  unsupportedScalars,
  validateRendering,
} from "../../shared/console/narrators/grounding.js";
import type { ToolOk } from "../../shared/console/tools/tool.js";

const OBSERVED = "2026-11-27T09:00:00.000Z";
const result: ToolOk = {
  status: "ok",
  tool: "job_report",
  evidence_ref: "audit:r1",
  observed_at: OBSERVED,
  data: {
    jobs: [{ id: "j-7", status: "failed", exit_code: 3, failed_at: "2026-11-27T01:02:03Z", rule_id: "R-JOB-001" }],
    total_failed: 1,
    queue: { depth: 42, capacity: 1200, ratio: "42/1200" },
    listener: "port 8080",
    event_id: "0b0c5e2a-5d1e-4f7e-9a35-2a1c3e9b7d41",
    incident: "INC-0123456789ab",
    action: "retry_job",
  },
};
const one = (text: string, fields: string[], ref = "audit:r1") =>
  JSON.stringify({
    evidence_ref: ref,
    sentences: [{ text, cites: fields.map((field) => ({ evidence_ref: ref, field })) }],
  });
const check = (text: string, fields: string[]) =>
  validateRendering(one(text, fields), [result], { actionTypes: ["retry_job", "cancel_job"] });

describe("C-024 C-025 C-026 C-027 C-028 the grounded-answer validator (rule 3): values must be in the fields each sentence cites", () => {
  it("accepts a sentence whose every value is in its cited fields, and appends the evidence references", () => {
    expect(
      check("Job j-7 failed with exit code 3 at 2026-11-27T01:02:03Z.", [
        "jobs[0].id",
        "jobs[0].exit_code",
        "jobs[0].failed_at",
      ]),
    ).toEqual({
      ok: true,
      text: "Job j-7 failed with exit code 3 at 2026-11-27T01:02:03Z.\n(evidence: audit:r1)",
    });
    expect(check("The queue holds 42 of 1,200 slots.", ["queue.depth", "queue.capacity"]).ok).toBe(true);
    expect(check("One job is listed.", ["jobs"]).ok).toBe(true);
    expect(check("Nothing else is known.", []).ok).toBe(true);
  });

  it("C-024: a hallucinated number is rejected", () => {
    expect(check("Job j-7 failed with exit code 137.", ["jobs[0].exit_code"])).toMatchObject({
      ok: false,
      reason: "ungrounded_number",
    });
  });

  it("C-024 (DESIGN §7): a number present elsewhere in the result but not in the cited field is rejected", () => {
    // 8080 and 42 are in the result (the listener, the queue) but not in the field the sentence cites.
    expect(check("Job j-7 failed with exit code 8080.", ["jobs[0].exit_code"])).toMatchObject({
      reason: "ungrounded_number",
    });
    expect(check("42 jobs failed.", ["total_failed"])).toMatchObject({ reason: "ungrounded_number" });
    // Citing the whole result (or any object) grounds nothing.
    expect(check("42 jobs failed.", ["queue"])).toMatchObject({ reason: "unknown_citation" });
    expect(check("42 jobs failed.", [""])).toMatchObject({ reason: "unknown_citation" });
    expect(check("It failed.", ["jobs[0].nope"])).toMatchObject({ reason: "unknown_citation" });
  });

  it("full-width digits, thousands separators and 1.2k-style abbreviations cannot smuggle a number past it", () => {
    expect(check("Exit code ３.", ["jobs[0].exit_code"]).ok).toBe(true);
    expect(check("Exit code １３７.", ["jobs[0].exit_code"])).toMatchObject({ reason: "ungrounded_number" });
    expect(check("Capacity is 1,200 slots.", ["queue.capacity"]).ok).toBe(true);
    expect(check("Capacity is 1.2k slots.", ["queue.capacity"]).ok).toBe(true);
    expect(check("Capacity is 1.3k slots.", ["queue.capacity"])).toMatchObject({ reason: "ungrounded_number" });
    expect(check("Capacity is 1 300 slots.", ["queue.capacity"])).toMatchObject({ reason: "ungrounded_number" });
    expect(check("Capacity is twelve hundred.", ["queue.capacity"])).toMatchObject({ reason: "ungrounded_number" });
    expect(check("Depth is 4.2万.", ["queue.depth"])).toMatchObject({ reason: "ungrounded_number" });
    expect(normalizeText("１２，３４５")).toBe("12345");
    expect(numbersIn("3M and 2.5k and 1,234,567")).toEqual([3_000_000, 2500, 1_234_567]);
  });

  it("C-025: a ratio is checked part by part against the cited fields", () => {
    expect(check("The queue is at 42/1200.", ["queue.ratio"]).ok).toBe(true);
    expect(check("The queue is at 42/1300.", ["queue.ratio"])).toMatchObject({ reason: "ungrounded_number" });
    expect(check("The queue is 35% full.", ["queue.ratio"])).toMatchObject({ reason: "ungrounded_number" });
  });

  it("C-026: an RFC 3339 timestamp must be in the cited field exactly", () => {
    expect(check("It failed at 2026-11-27T01:02:04Z.", ["jobs[0].failed_at"])).toMatchObject({
      reason: "ungrounded_timestamp",
    });
    expect(check("It failed at 2026-11-27T01:02:03Z.", ["jobs[0].exit_code"])).toMatchObject({
      reason: "ungrounded_timestamp",
    });
  });

  it("C-027: rule, event, incident and action-type ids must be in the cited fields", () => {
    expect(check("Rule R-JOB-001 matched.", ["jobs[0].rule_id"]).ok).toBe(true);
    expect(check("Rule R-JOB-002 matched.", ["jobs[0].rule_id"])).toMatchObject({ reason: "ungrounded_identifier" });
    expect(check("Event 0b0c5e2a-5d1e-4f7e-9a35-2a1c3e9b7d42 was seen.", ["event_id"])).toMatchObject({
      reason: "ungrounded_identifier",
    });
    expect(check("Event 0b0c5e2a-5d1e-4f7e-9a35-2a1c3e9b7d41 was seen.", ["event_id"]).ok).toBe(true);
    expect(check("Incident INC-ffffffffffff opened.", ["incident"])).toMatchObject({ reason: "ungrounded_identifier" });
    expect(check("The proposal is cancel_job.", ["action"])).toMatchObject({ reason: "ungrounded_identifier" });
    expect(check("The proposal is retry_job.", ["action"]).ok).toBe(true);
  });

  it("C-028: current, live, latest (and 현재, 최신, 실시간) need the result's exact observation time in the sentence", () => {
    expect(check("The latest job failed.", ["jobs[0].status"])).toMatchObject({ reason: "stale_freshness_claim" });
    expect(check("현재 작업이 실패했습니다.", ["jobs[0].status"])).toMatchObject({ reason: "stale_freshness_claim" });
    expect(check(`As of ${OBSERVED} the latest job failed.`, ["jobs[0].status", "observed_at"]).ok).toBe(true);
    // The time must also be cited: writing it without citing observed_at is an ungrounded timestamp.
    expect(check(`As of ${OBSERVED} the latest job failed.`, ["jobs[0].status"])).toMatchObject({
      reason: "ungrounded_timestamp",
    });
  });

  it("C-023 C-022: a missing or foreign evidence_ref, malformed output and an over-long answer are rejected", () => {
    expect(validateRendering(one("It failed.", [], "audit:other"), [result])).toMatchObject({
      reason: "missing_evidence_ref",
    });
    expect(validateRendering(JSON.stringify({ sentences: [{ text: "It failed." }] }), [result])).toMatchObject({
      reason: "missing_evidence_ref",
    });
    expect(validateRendering("Job j-7 failed.", [result])).toMatchObject({ reason: "malformed_rendering" });
    const long = JSON.stringify({
      evidence_ref: "audit:r1",
      sentences: Array.from({ length: 40 }, () => ({
        text: "It failed, and that is all there is to say about it. ".repeat(2),
        cites: [],
      })),
    });
    expect(validateRendering(long, [result])).toMatchObject({ reason: "over_limit" });
  });
});

describe("rule 5's argument check (C-037)", () => {
  it("finds values after Unicode and separator normalization, and names those nowhere in the conversation", () => {
    expect(unsupportedScalars({ job_id: "j-7", limit: 20 }, ["show job J_7", "only ２０ please"])).toEqual([]);
    expect(unsupportedScalars({ job_id: "j-8" }, ["show job j-7"])).toEqual(["j-8"]);
    expect(unsupportedScalars({ params: { job_id: "abc" } }, ["retry it"])).toEqual(["abc"]);
  });
});

describe("rule 7's comparison (C-050 C-051)", () => {
  const ok = (tool: string, data: unknown): ToolOk => ({
    status: "ok",
    tool,
    data,
    evidence_ref: `ev:${tool}`,
    observed_at: OBSERVED,
  });
  it("compares state fields only for the same identifier, across tools, keeping both sides", () => {
    expect(
      findConflicts([
        ok("a", { items: [{ id: "x", status: "failed" }] }),
        ok("b", { items: [{ id: "y", status: "running" }] }),
      ]),
    ).toEqual([]);
    expect(findConflicts([ok("a", { id: "x", status: "failed" }), ok("b", { id: "x", status: "failed" })])).toEqual([]);
    expect(
      findConflicts([ok("a", { id: "x", status: "failed" }), ok("b", { r: [{ id: "x", status: "running" }] })]),
    ).toEqual([
      {
        identifier: { field: "id", value: "x" },
        field: "status",
        sides: [
          { tool: "a", evidence_ref: "ev:a", observed_at: OBSERVED, path: "status", value: "failed" },
          { tool: "b", evidence_ref: "ev:b", observed_at: OBSERVED, path: "r[0].status", value: "running" },
        ],
      },
    ]);
    // A different identifier kind with the same value is not the same resource.
    expect(findConflicts([ok("a", { id: "x", state: "on" }), ok("b", { scope_ref: "x", state: "off" })])).toEqual([]);
  });
});
