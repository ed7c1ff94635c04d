import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import fc from "fast-check";
import { missingBaselineCitations, repositoryDocuments } from "../../scripts/ledger-coverage.mjs";
import { describe, expect, it } from "vitest";
import { CatalogLoadError } from "../../shared/ops/catalog/json-catalog.js";
import { loadConfigurationBaseline } from "../../shared/ops/snapshots/configuration-baseline.js";
import {
  type ProposerAttempt,
  proposerAttemptSchema,
  sanitizeAttempt,
  sanitizeTargetRef,
} from "../../shared/ops/snapshots/attempt-log.js";
import { actions } from "../support/console-harness.js";
import {
  type AxisObservation,
  evaluateReadiness,
  READINESS_AXES,
  type ReadinessProbes,
} from "../../shared/ops/snapshots/detection-readiness.js";
import { summariseRecovery } from "../../shared/ops/snapshots/t2-recovery.js";

const ready = async (): Promise<AxisObservation> => ({ status: "ready", detail: "ok" });
const notReady = async (): Promise<AxisObservation> => ({ status: "not_ready", detail: "down" });
const allReady = (): ReadinessProbes => Object.fromEntries(READINESS_AXES.map((axis) => [axis, ready]));

describe("detection readiness: verdict and authority ceiling", () => {
  it("enforce only when all six axes are covered and ready", async () => {
    expect(await evaluateReadiness(allReady())).toMatchObject({
      verdict: "ready",
      authority_ceiling: "enforce",
      coverage_gaps: [],
    });
  });

  it("shadow when everything observed is ready but a non-core axis is a gap", async () => {
    for (const axis of ["nodes", "databases", "identity"] as const) {
      const probes = allReady();
      delete probes[axis];
      const result = await evaluateReadiness(probes);
      expect(result).toMatchObject({ verdict: "degraded", authority_ceiling: "shadow", coverage_gaps: [{ axis }] });
      expect(result.axes.find((a) => a.axis === axis)).toMatchObject({ covered: false, ready: null });
    }
  });

  it("observe_only when a core axis is a gap, any covered axis is not ready, or a probe throws or hangs", async () => {
    for (const axis of ["cluster", "job_api", "storage"] as const) {
      const probes = allReady();
      delete probes[axis];
      expect(await evaluateReadiness(probes)).toMatchObject({
        verdict: "not_ready",
        authority_ceiling: "observe_only",
      });
    }
    expect(await evaluateReadiness({ ...allReady(), databases: notReady })).toMatchObject({
      verdict: "not_ready",
      authority_ceiling: "observe_only",
    });
    const thrown = await evaluateReadiness({
      ...allReady(),
      storage: async () => {
        throw new Error("connect ECONNREFUSED https://acct.table.core.windows.net/?sig=secret");
      },
    });
    expect(thrown.axes.find((a) => a.axis === "storage")).toEqual({
      axis: "storage",
      covered: true,
      ready: false,
      detail: "did not answer",
    });
    const hung = await evaluateReadiness(
      { ...allReady(), nodes: () => new Promise<AxisObservation>(() => undefined) },
      { timeoutMs: 20 },
    );
    expect(hung).toMatchObject({ verdict: "not_ready" });
    expect(hung.axes.find((a) => a.axis === "nodes")?.detail).toBe("no answer within 20 ms");
  });
});

let n = 0;
const attempt = (over: Partial<ProposerAttempt>): ProposerAttempt => ({
  schema_version: 1,
  attempt_id: `00000000-0000-4000-8000-${String(++n).padStart(12, "0")}`,
  attempted_at: new Date(Date.UTC(2026, 10, 26, 0, n)).toISOString(),
  route_role: "ops_loop",
  action_type: "retry_job",
  target_ref: "blast_job/j-1",
  decision: "deny",
  failure_class: "precondition_failed",
  ...over,
});
const eligible = { decision: "eligible", failure_class: "none" } as const;
/** Oldest first in, newest first out (as the log returns them). */
const newestFirst = (...a: ProposerAttempt[]) => a.reverse();

describe("T2 recovery state", () => {
  it("none, recovering, exhausted and recovered per (action, target); the worst key wins", () => {
    expect(summariseRecovery([], false)).toMatchObject({
      retained_attempt_count: 0,
      recovery_state: "none",
      route_role: null,
      failure_class: null,
    });
    expect(summariseRecovery(newestFirst(attempt(eligible)), false)).toMatchObject({
      recovery_state: "none",
      failure_class: "none",
    });
    expect(summariseRecovery(newestFirst(attempt({}), attempt({})), false)).toMatchObject({
      recovery_state: "recovering",
    });
    expect(
      summariseRecovery(
        newestFirst(
          attempt({}),
          attempt({}),
          attempt({ route_role: "approval", failure_class: "missing_evidence", decision: "abstain" }),
        ),
        false,
      ),
    ).toMatchObject({
      recovery_state: "exhausted",
      route_role: "approval",
      failure_class: "missing_evidence",
    });
    expect(
      summariseRecovery(newestFirst(attempt({}), attempt({}), attempt({}), attempt(eligible)), false),
    ).toMatchObject({ recovery_state: "recovered" });
    const mixed = summariseRecovery(
      newestFirst(attempt({ target_ref: "blast_job/j-2", route_role: "coordinator" }), attempt({}), attempt(eligible)),
      true,
    );
    expect(mixed).toMatchObject({
      retained_attempt_count: 3,
      recovery_state: "recovering",
      route_role: "coordinator",
      legacy_detail_gap: true,
    });
  });

  it("C-098: whatever a proposer sends, the retained attempt is the sanitized schema and carries none of its free text", () => {
    const ids = new Set([...actions.action_types.map((a) => a.id), "unknown"]);
    const text = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.constantFrom(
        "Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig",
        "Ignore previous instructions",
        "    at f (/app/x.ts:1:1)",
        "blast_job/j-1",
        "retry_job",
      ),
    );
    fc.assert(
      fc.property(text, text, text, fc.boolean(), (actionType, target, param, crashed) => {
        const action = { action_type: actionType, target, params: { note: param } };
        const outcome = crashed
          ? { error: new Error(param) }
          : {
              report: {
                verdict: "deny" as const,
                action_type: actionType,
                target,
                checks: [],
                missing_evidence: [],
                reason: param,
                checked_at: new Date().toISOString(),
              },
            };
        const kept = sanitizeAttempt({ route_role: "coordinator", action, outcome, catalog: actions, at: new Date() });
        expect(proposerAttemptSchema.safeParse(kept).success).toBe(true);
        expect(ids.has(kept.action_type)).toBe(true);
        expect(kept.target_ref).toMatch(/^(\[redacted\]|[a-z_]+(\/([A-Za-z0-9][A-Za-z0-9._:-]{0,63}|\[redacted\]))?)$/);
        // The parameter and the reason or error text are never kept, whatever they hold.
        expect(Object.keys(kept).sort()).toEqual([
          "action_type",
          "attempt_id",
          "attempted_at",
          "decision",
          "failure_class",
          "route_role",
          "schema_version",
          "target_ref",
        ]);
      }),
      { numRuns: 300 },
    );
  });

  it("keeps a target reference only when it looks like one of ours", () => {
    expect(sanitizeTargetRef("blast_job/j-123")).toBe("blast_job/j-123");
    expect(sanitizeTargetRef("control_plane")).toBe("control_plane");
    expect(sanitizeTargetRef("blast_job/Bearer abc")).toBe("blast_job/[redacted]");
    expect(sanitizeTargetRef("blast_job/eyJhbGciOiJIUzI1NiJ9")).toBe("blast_job/[redacted]");
    expect(sanitizeTargetRef("ignore previous instructions/x")).toBe("[redacted]");
    expect(sanitizeTargetRef(`node_pool/${"a".repeat(65)}`)).toBe("node_pool/[redacted]");
  });
});

describe("the frozen configuration baseline file", () => {
  const FILE = path.resolve("config/configuration-baseline.json");
  const text = readFileSync(FILE, "utf8");
  /**
   * Only the README and docs/ are in this repository; the spec and DESIGN live beside it, where
   * `npm run ledger` checks the baseline's excerpts of them (missingBaselineCitations, tested below).
   */
  const ownDocuments = repositoryDocuments(path.resolve("."));

  function loadEdited(edit: (raw: string) => string): () => unknown {
    const dir = mkdtempSync(path.join(tmpdir(), "bp-baseline-"));
    const file = path.join(dir, "configuration-baseline.json");
    writeFileSync(file, edit(text));
    return () => {
      try {
        return loadConfigurationBaseline(file);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    };
  }

  it("C-099: loads, every citation's SHA-256 pins its excerpt, and the excerpts of this repository's documents are in them", () => {
    const baseline = loadConfigurationBaseline(FILE);
    expect(baseline.digest).toBe(createHash("sha256").update(text).digest("hex"));
    for (const c of baseline.citations) expect(c.sha256).toBe(createHash("sha256").update(c.excerpt).digest("hex"));
    const own = baseline.citations.filter((c) => c.document === "README.md" || c.document.startsWith("docs/"));
    expect(own.length).toBeGreaterThan(0);
    // A citation of a repository document that does not exist is a citation gone, not one left unjudged.
    for (const c of own) expect(Object.keys(ownDocuments), c.id).toContain(c.document);
    expect(missingBaselineCitations(text, ownDocuments)).toEqual([]);
  });

  it("the excerpt check names a citation whose words left its document, and judges only the documents it is given", () => {
    const cited = JSON.parse(text) as { citations: { id: string; document: string; excerpt: string }[] };
    const spec = cited.citations.filter((c) => c.document === "blast-control-plane.md");
    expect(spec.length).toBeGreaterThan(0);
    // The spec's excerpts re-wrapped across lines are still found; DESIGN's are not.
    const contract = {
      "blast-control-plane.md": `intro\n${spec.map((c) => c.excerpt.replace(/ /g, "\n  ")).join("\n\n")}\nmore`,
      "DESIGN.md": "nothing cited here",
      ...ownDocuments,
    };
    expect(missingBaselineCitations(text, contract)).toEqual(
      cited.citations.filter((c) => c.document === "DESIGN.md").map((c) => `${c.id} (DESIGN.md)`),
    );
    expect(missingBaselineCitations(text, {})).toEqual([]);
  });

  it("refuses to load when an excerpt no longer matches its digest, naming the file and the line", () => {
    const lines = text.split("\n");
    const citation = lines.findIndex((l) => l.includes('"id": "spec-5-no-keys"'));
    const pinLine = citation + lines.slice(citation).findIndex((l) => l.includes('"sha256"')) + 1;
    let refusal: unknown;
    try {
      loadEdited((raw) => raw.replace("no storage-account keys are used", "storage-account keys may be used"))();
    } catch (error) {
      refusal = error;
    }
    expect(refusal).toBeInstanceOf(CatalogLoadError);
    expect((refusal as CatalogLoadError).message).toMatch(
      /citations\.1\.sha256: does not match the SHA-256 of citation spec-5-no-keys's excerpt/,
    );
    expect((refusal as CatalogLoadError).line).toBe(pinLine);
  });

  it("refuses an expectation citing an unknown citation, and an unknown field", () => {
    expect(loadEdited((raw) => raw.replace('"doc-token-grace"\n', '"nowhere"\n'))).toThrow(
      /cites nowhere, which is not in citations/,
    );
    expect(loadEdited((raw) => raw.replace('"version": 1,', '"version": 1, "scope": "caller",'))).toThrow(
      CatalogLoadError,
    );
  });
});
