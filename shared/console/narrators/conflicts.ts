import type { ToolOk } from "../tools/tool.js";

/**
 * Coordinator rule 7: before synthesis, the state-like fields of different tools' results are
 * compared, but only for records that name the same `resource_id`, `scope_ref` or `id` — two
 * different resources in different states are no conflict (C-050). A difference keeps both
 * evidence sets (C-051) and makes the aggregate an abstention without model rendering (C-052).
 */
export const COMPARED_FIELDS = ["state", "status", "verdict", "mode", "health", "outcome"] as const;
export const IDENTITY_FIELDS = ["resource_id", "scope_ref", "id"] as const;

/** One side of a conflict: which tool said what, where, on which evidence. */
export interface ConflictSide {
  tool: string;
  evidence_ref: string;
  observed_at: string;
  /** Path of the value in the tool's data. */
  path: string;
  value: string | number | boolean | null;
}

export interface Conflict {
  identifier: { field: (typeof IDENTITY_FIELDS)[number]; value: string };
  field: (typeof COMPARED_FIELDS)[number];
  sides: ConflictSide[];
}

interface Observation extends ConflictSide {
  step: number;
  key: string;
  field: (typeof COMPARED_FIELDS)[number];
  identifier: Conflict["identifier"];
}

type Scalar = string | number | boolean | null;
const isScalar = (v: unknown): v is Scalar =>
  v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean";

/** Every (identifier, compared field) a result's records state; nested records too (bounded depth). */
function observationsOf(result: ToolOk, step: number): Observation[] {
  const out: Observation[] = [];
  const visit = (value: unknown, path: string, depth: number) => {
    if (depth > 8 || value === null || typeof value !== "object") return;
    if (Array.isArray(value)) {
      for (const [i, v] of value.entries()) visit(v, `${path}[${i}]`, depth + 1);
      return;
    }
    const record = value as Record<string, unknown>;
    for (const idField of IDENTITY_FIELDS) {
      const id = record[idField];
      if (typeof id !== "string" && typeof id !== "number") continue;
      for (const field of COMPARED_FIELDS) {
        const v = record[field];
        if (!isScalar(v)) continue;
        out.push({
          step,
          key: `${idField}\u0000${String(id)}\u0000${field}`,
          field,
          identifier: { field: idField, value: String(id) },
          tool: result.tool,
          evidence_ref: result.evidence_ref,
          observed_at: result.observed_at,
          path: `${path ? `${path}.` : ""}${field}`,
          value: v,
        });
      }
    }
    for (const [k, v] of Object.entries(record)) visit(v, path ? `${path}.${k}` : k, depth + 1);
  };
  visit(result.data, "", 0);
  return out;
}

/** The conflicts among the results of different plan steps (same identifier, same field, different values). */
export function findConflicts(results: readonly ToolOk[]): Conflict[] {
  const byKey = new Map<string, Observation[]>();
  results.forEach((r, step) => {
    for (const o of observationsOf(r, step)) byKey.set(o.key, [...(byKey.get(o.key) ?? []), o]);
  });
  const conflicts: Conflict[] = [];
  for (const observations of byKey.values()) {
    const steps = new Set(observations.map((o) => o.step));
    const values = new Set(observations.map((o) => JSON.stringify(o.value)));
    // Only across tools: one result disagreeing with itself is that tool's own business.
    if (steps.size < 2 || values.size < 2) continue;
    const first = observations[0];
    if (!first) continue;
    conflicts.push({
      identifier: first.identifier,
      field: first.field,
      sides: observations.map(({ tool, evidence_ref, observed_at, path, value }) => ({
        tool,
        evidence_ref,
        observed_at,
        path,
        value,
      })),
    });
  }
  return conflicts;
}
