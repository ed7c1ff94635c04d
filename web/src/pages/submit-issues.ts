import type { FieldIssue } from "../api.js";

/**
 * Where the New search page shows each refusal: next to the field it names when the form shows
 * that field, otherwise at the top of the form, saying which field it is about. Every `loc` the
 * API can answer lands somewhere visible (issue 23, defect 3): a refusal the page cannot place is
 * still a refusal the researcher must read.
 */
export interface PlacedIssues {
  /** Messages by form field key: `program`, `db`, `query_fasta`, `options.evalue`, … */
  byField: Record<string, string[]>;
  /** Messages for fields the form lacks, or for the request as a whole; each names its field. */
  top: string[];
}

/** The form field a `loc` names: `options.<key>` for a BLAST option, the body field otherwise. */
export function fieldKeyOf(loc: readonly (string | number)[]): string | undefined {
  const [, field, sub] = loc;
  if (typeof field !== "string") return undefined;
  if (field === "options" && typeof sub === "string") return `options.${sub}`;
  return field;
}

/** How a field the form may lack is named at the top of the page. */
const FIELD_NAMES: Record<string, string> = {
  program: "Program",
  db: "Database",
  query_fasta: "Query",
  options: "BLAST options",
  priority: "Priority",
  title: "Title",
  execution_profile: "Execution profile",
  idempotency_key: "The request's idempotency key (sent by the page)",
};

/**
 * Places `issues` for a form that shows the fields in `shown`. `optionLabel` names a BLAST option
 * (the form's label, when it has one).
 */
export function placeIssues(
  issues: readonly FieldIssue[],
  shown: ReadonlySet<string>,
  optionLabel: (key: string) => string | undefined,
): PlacedIssues {
  const byField: Record<string, string[]> = {};
  const top: string[] = [];
  for (const issue of issues) {
    const key = fieldKeyOf(issue.loc);
    if (key !== undefined && shown.has(key)) {
      byField[key] = [...(byField[key] ?? []), issue.msg];
      continue;
    }
    top.push(`${nameOf(key, optionLabel)}: ${issue.msg}`);
  }
  return { byField, top };
}

function nameOf(key: string | undefined, optionLabel: (key: string) => string | undefined): string {
  if (key === undefined) return "The request";
  if (key.startsWith("options.")) {
    const option = key.slice("options.".length);
    const label = optionLabel(option);
    return label ? `${label} (option ${option})` : `BLAST option '${option}'`;
  }
  return FIELD_NAMES[key] ?? `Field '${key}'`;
}
