import { useMemo, useState } from "preact/hooks";
import { parseQueryFasta } from "../../../shared/blast/fasta.js";
import {
  BLAST_TASKS,
  GENETIC_CODES,
  OPTION_PROGRAMS,
  SCORING_MATRICES,
  validateOptionsForProgram,
} from "../../../shared/blast/options.js";
import { BLAST_PROGRAMS, type BlastProgram, databaseMolecule, queryMolecule } from "../../../shared/blast/programs.js";
import { moleculeWord, queryProgramHint } from "../../../shared/blast/sequence-kind.js";
import { dashboardSubmitSchema } from "../../../shared/dashboard/schemas.js";
import { ValidationError } from "../../../shared/errors.js";
import { zodIssues } from "../../../shared/http/validation.js";
import { ApiError, type FieldIssue, type SubmitRequest } from "../api.js";
import { EXAMPLE_DATABASE, EXAMPLE_QUERY } from "../example-query.js";
import { formatBytes, formatCount } from "../format.js";
import { fieldKeyOf, placeIssues } from "./submit-issues.js";
import { Link, navigate } from "../router.js";
import { ErrorNotice, Field, fieldAria, PageTitle, topRole, useApp, useAsync, useCan } from "../ui.js";

type OptionKey = keyof typeof OPTION_PROGRAMS;

/** How each allow-listed BLAST option is offered; which appear depends on the program. */
const OPTION_FIELDS: readonly {
  key: OptionKey;
  label: string;
  kind: "number" | "integer" | "boolean" | "choice";
  hint: string;
  basic?: boolean;
}[] = [
  {
    key: "evalue",
    label: "E-value threshold",
    kind: "number",
    hint: "Report hits with an e-value up to this (BLAST's default 10).",
    basic: true,
  },
  {
    key: "max_target_seqs",
    label: "Maximum hits per query",
    kind: "integer",
    hint: "1–5000 (BLAST's default 500).",
    basic: true,
  },
  { key: "task", label: "Task", kind: "choice", hint: "The search's sensitivity preset.", basic: true },
  {
    key: "word_size",
    label: "Word size",
    kind: "integer",
    hint: "Seed length; the allowed range depends on program and task.",
  },
  { key: "perc_identity", label: "Minimum % identity", kind: "number", hint: "0–100." },
  { key: "qcov_hsp_perc", label: "Minimum % query coverage per HSP", kind: "number", hint: "0–100." },
  { key: "max_hsps", label: "Maximum HSPs per subject", kind: "integer", hint: "1–1000." },
  { key: "num_alignments", label: "Alignments per query", kind: "integer", hint: "1–5000." },
  { key: "strand", label: "Query strand", kind: "choice", hint: "Which strand(s) of the query to search." },
  {
    key: "dust",
    label: "DUST low-complexity filter",
    kind: "boolean",
    hint: "Filter low-complexity regions of the query.",
  },
  {
    key: "seg",
    label: "SEG low-complexity filter",
    kind: "boolean",
    hint: "Filter low-complexity regions of the (translated) query.",
  },
  { key: "soft_masking", label: "Soft masking", kind: "boolean", hint: "Apply filtering only when finding seeds." },
  { key: "ungapped", label: "Ungapped alignment only", kind: "boolean", hint: "" },
  { key: "matrix", label: "Scoring matrix", kind: "choice", hint: "" },
  { key: "gapopen", label: "Gap open cost", kind: "integer", hint: "Supported pairs depend on the scoring system." },
  { key: "gapextend", label: "Gap extend cost", kind: "integer", hint: "" },
  { key: "comp_based_stats", label: "Composition-based statistics", kind: "integer", hint: "0–3." },
  { key: "window_size", label: "Multiple-hits window", kind: "integer", hint: "0 for the one-hit algorithm." },
  { key: "threshold", label: "Word score threshold", kind: "number", hint: "" },
  { key: "query_gencode", label: "Query genetic code", kind: "choice", hint: "" },
  { key: "db_gencode", label: "Database genetic code", kind: "choice", hint: "" },
];

function choices(key: OptionKey, program: BlastProgram): readonly string[] {
  switch (key) {
    case "task":
      return BLAST_TASKS[program];
    case "strand":
      return ["both", "plus", "minus"];
    case "matrix":
      return SCORING_MATRICES;
    case "query_gencode":
    case "db_gencode":
      return GENETIC_CODES.map(String);
    default:
      return [];
  }
}

const PRIORITIES = ["low", "normal", "high", "urgent"] as const;

/** The form's own fields (besides the BLAST options it shows for the program). */
const FORM_FIELDS = ["program", "db", "query_fasta", "title", "priority", "execution_profile"] as const;

function optionLabel(key: string): string | undefined {
  return OPTION_FIELDS.find((f) => f.key === key)?.label;
}

/** The form's option values (strings as typed) as the request's `options` object. */
function optionsFrom(values: Record<string, string>, program: BlastProgram): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  for (const field of OPTION_FIELDS) {
    const raw = values[field.key]?.trim() ?? "";
    if (raw === "" || !OPTION_PROGRAMS[field.key].includes(program)) continue;
    if (field.kind === "number" || field.kind === "integer") options[field.key] = Number(raw);
    else if (field.kind === "boolean") options[field.key] = raw === "true";
    else if (field.key === "query_gencode" || field.key === "db_gencode") options[field.key] = Number(raw);
    else options[field.key] = raw;
  }
  return options;
}

/** Validates the request with the backend's own rules: schema, options for the program, FASTA. */
function validate(request: SubmitRequest): FieldIssue[] {
  const parsed = dashboardSubmitSchema.safeParse(request);
  if (!parsed.success) return zodIssues(parsed.error, "body", request);
  const issues: FieldIssue[] = [];
  const program = parsed.data.program;
  try {
    if (parsed.data.options) validateOptionsForProgram(program, parsed.data.options, "options");
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    issues.push(...error.issues);
  }
  try {
    parseQueryFasta(parsed.data.query_fasta, queryMolecule(program));
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    issues.push(...error.issues);
  }
  return issues;
}

/** A new search: program, database, query (pasted or uploaded), options and profile. */
export function SubmitPage() {
  const app = useApp();
  const canSubmit = useCan("Contributor");
  if (!canSubmit) {
    return (
      <section>
        <PageTitle>New search</PageTitle>
        <div class="notice" role="note">
          <p>
            Your role, <strong>{topRole(app.caller) ?? "none"}</strong>, can view jobs and results but cannot submit
            searches. Submitting needs the Contributor role or higher; ask an Owner of this workspace.
          </p>
        </div>
      </section>
    );
  }
  return <SubmitForm />;
}

function SubmitForm() {
  const { api } = useApp();
  const databases = useAsync((signal) => api.listDatabases(signal), []);
  const [title, setTitle] = useState("");
  const [program, setProgram] = useState<BlastProgram>("blastn");
  const [db, setDb] = useState("");
  const [query, setQuery] = useState("");
  const [profile, setProfile] = useState<"standard" | "sharded">("standard");
  const [priority, setPriority] = useState<(typeof PRIORITIES)[number]>("normal");
  const [optionValues, setOptionValues] = useState<Record<string, string>>({});
  const [refusals, setRefusals] = useState<readonly FieldIssue[]>([]);
  const [moreOptionsOpen, setMoreOptionsOpen] = useState(false);
  const clearField = (key: string) => setRefusals((list) => list.filter((i) => fieldKeyOf(i.loc) !== key));
  const [submitError, setSubmitError] = useState<unknown>(undefined);
  const [submitting, setSubmitting] = useState(false);
  // One key per search being composed: a double click or a retry after a lost answer is one job.
  const [idempotencyKey, setIdempotencyKey] = useState(() => crypto.randomUUID());

  const usable = (databases.data?.databases ?? []).filter((d) => d.type === databaseMolecule(program));
  const chosenDb =
    db && usable.some((d) => d.name === db)
      ? db
      : (usable.find((d) => d.name === EXAMPLE_DATABASE)?.name ?? usable[0]?.name ?? "");
  // Checked as the user types (the server's own rules), so no message appears or vanishes on blur
  // and moves the submit button from under the pointer.
  const live = useMemo(() => {
    if (!query.trim()) return {};
    try {
      const records = parseQueryFasta(query, queryMolecule(program));
      return { summary: { count: records.length, letters: records.reduce((n, r) => n + r.sequence.length, 0) } };
    } catch (error) {
      if (error instanceof ValidationError) return { issues: error.issues.map((i) => i.msg) };
      throw error;
    }
  }, [query, program]);
  const summary = live.summary;
  // A protein pasted under blastn (or the reverse): say so and offer the programs that fit.
  const programHint = useMemo(() => queryProgramHint(program, query), [program, query]);
  const chosenEntry = usable.find((d) => d.name === chosenDb);

  const request = (): SubmitRequest => {
    const options = optionsFrom(optionValues, program);
    return {
      program,
      db: chosenDb,
      query_fasta: query,
      execution_profile: profile,
      priority,
      idempotency_key: idempotencyKey,
      ...(title.trim() ? { title: title.trim() } : {}),
      ...(Object.keys(options).length > 0 ? { options: options as SubmitRequest["options"] } : {}),
    };
  };

  const onSubmit = async (event: Event) => {
    event.preventDefault();
    setSubmitError(undefined);
    const body = request();
    const found = validate(body);
    setRefusals(found);
    if (found.length > 0) {
      focusFirstInvalid();
      return;
    }
    setSubmitting(true);
    try {
      const envelope = await api.submitJob(body);
      setIdempotencyKey(crypto.randomUUID());
      navigate(`/blast/jobs/${envelope.job_id}`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 422) {
        setRefusals(error.issues);
        focusFirstInvalid();
      }
      setSubmitError(error);
    } finally {
      setSubmitting(false);
    }
  };

  const onFile = async (event: Event) => {
    const file = (event.currentTarget as HTMLInputElement).files?.[0];
    if (!file) return;
    setQuery(await file.text());
    clearField("query_fasta");
  };

  const shown = OPTION_FIELDS.filter(
    (f) => OPTION_PROGRAMS[f.key].includes(program) && !(f.kind === "choice" && choices(f.key, program).length === 0),
  );
  // Every refusal is shown: next to its field when the form has it, otherwise at the top.
  const placed = placeIssues(
    refusals,
    new Set<string>([...FORM_FIELDS, ...shown.map((f) => `options.${f.key}`)]),
    optionLabel,
  );
  const issues = placed.byField;
  // A refused option under "More options" opens it, so its message is on screen.
  const moreOptionsRefused = shown.some((f) => !f.basic && issues[`options.${f.key}`]?.length);
  const profileError = issues.execution_profile?.join(" ");
  const queryError = issues.query_fasta?.length ? issues.query_fasta.join(" ") : live.issues?.join(" ");
  const optionInput = (field: (typeof OPTION_FIELDS)[number]) => {
    const id = `opt-${field.key}`;
    const error = issues[`options.${field.key}`]?.join(" ");
    const value = optionValues[field.key] ?? "";
    const set = (v: string) => setOptionValues((o) => ({ ...o, [field.key]: v }));
    const aria = fieldAria(id, error, field.hint !== "");
    return (
      <Field
        key={field.key}
        id={id}
        label={field.label}
        hint={
          field.key === "task"
            ? `${field.hint} BLAST's default for ${program}: ${BLAST_TASKS[program][0] ?? "none"}.`
            : field.hint || undefined
        }
        error={error}
      >
        {field.kind === "boolean" || field.kind === "choice" ? (
          <select id={id} value={value} onChange={(e) => set(e.currentTarget.value)} {...aria}>
            <option value="">BLAST default</option>
            {field.kind === "boolean" ? (
              <>
                <option value="true">yes</option>
                <option value="false">no</option>
              </>
            ) : (
              choices(field.key, program).map((c) => (
                <option key={c} value={c}>
                  {c}
                </option>
              ))
            )}
          </select>
        ) : (
          <input
            id={id}
            type="text"
            inputMode="decimal"
            value={value}
            onInput={(e) => set(e.currentTarget.value)}
            {...aria}
          />
        )}
      </Field>
    );
  };

  return (
    <section>
      <PageTitle subtitle="Choose a program and database, paste or upload your query, and submit. You can follow the search on its page.">
        New search
      </PageTitle>
      <ErrorNotice error={databases.error} title="Could not load the databases:" />
      <form class="form" onSubmit={onSubmit} noValidate>
        {placed.top.length > 0 ? (
          <div class="notice notice-error" role="alert" id="submit-refusals" tabIndex={-1}>
            {placed.top.map((m) => (
              <p key={m}>{m}</p>
            ))}
          </div>
        ) : null}
        <div class="grid-2">
          <Field id="program" label="Program" error={issues.program?.join(" ")}>
            <select
              id="program"
              value={program}
              onChange={(e) => setProgram(e.currentTarget.value as BlastProgram)}
              {...fieldAria("program", issues.program?.join(" "))}
            >
              {BLAST_PROGRAMS.map((p) => (
                <option key={p} value={p}>
                  {p} ({queryMolecule(p) === "nucl" ? "nucleotide" : "protein"} query,{" "}
                  {databaseMolecule(p) === "nucl" ? "nucleotide" : "protein"} database)
                </option>
              ))}
            </select>
          </Field>
          <Field
            id="db"
            label="Database"
            hint={
              !databases.data && !databases.error ? (
                "Loading the databases…"
              ) : usable.length === 0 && databases.data ? (
                <>
                  No {moleculeWord(databaseMolecule(program))} database is prepared yet.{" "}
                  <Link href="/databases">Add a {moleculeWord(databaseMolecule(program))} database</Link> by uploading a
                  FASTA file.
                </>
              ) : undefined
            }
            error={issues.db?.join(" ")}
          >
            <select
              id="db"
              value={chosenDb}
              onChange={(e) => setDb(e.currentTarget.value)}
              {...fieldAria("db", issues.db?.join(" "), usable.length === 0)}
            >
              {!databases.data && !databases.error ? <option value="">Loading…</option> : null}
              {usable.map((d) => (
                <option key={d.name} value={d.name}>
                  {d.name} — {formatCount(d.sequences)} sequences, {formatCount(d.letters)} letters,{" "}
                  {formatBytes(d.bytes)}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <Field
          id="query_fasta"
          label="Query (FASTA)"
          hint={
            summary
              ? `${formatCount(summary.count)} ${summary.count === 1 ? "sequence" : "sequences"}, ${formatCount(summary.letters)} letters.${
                  chosenEntry
                    ? ` Database ${chosenEntry.name}: ${formatCount(chosenEntry.sequences)} sequences, ${formatCount(chosenEntry.letters)} letters.`
                    : ""
                }`
              : "One or more sequences, each after a '>' header line; a single bare sequence also works."
          }
          error={queryError}
        >
          <textarea
            id="query_fasta"
            rows={10}
            spellcheck={false}
            value={query}
            onInput={(e) => {
              setQuery(e.currentTarget.value);
              clearField("query_fasta");
            }}
            {...fieldAria("query_fasta", queryError, true)}
          />
        </Field>
        {programHint ? (
          <div class="notice" role="status" id="query-program-hint">
            <p>{programHint.message}</p>
            <div class="row">
              {programHint.programs.map((p) => (
                <button
                  key={p}
                  type="button"
                  class="small"
                  onClick={() => {
                    setProgram(p);
                    clearField("query_fasta");
                  }}
                >
                  Use {p}
                </button>
              ))}
            </div>
          </div>
        ) : null}
        <div class="row">
          <label class="file-button">
            <input type="file" accept=".fa,.fasta,.fna,.faa,.txt,text/plain" onChange={onFile} />
            <span>Upload a FASTA file…</span>
          </label>
          {program === "blastn" ? (
            <button
              type="button"
              onClick={() => {
                setQuery(EXAMPLE_QUERY);
                clearField("query_fasta");
              }}
            >
              Use the example query
            </button>
          ) : null}
        </div>
        <div class="grid-2">
          <Field id="title" label="Title (optional)" error={issues.title?.join(" ")}>
            <input
              id="title"
              type="text"
              maxLength={200}
              value={title}
              onInput={(e) => setTitle(e.currentTarget.value)}
              {...fieldAria("title", issues.title?.join(" "))}
            />
          </Field>
          <Field id="priority" label="Priority" error={issues.priority?.join(" ")}>
            <select
              id="priority"
              value={priority}
              onChange={(e) => setPriority(e.currentTarget.value as typeof priority)}
              {...fieldAria("priority", issues.priority?.join(" "))}
            >
              {PRIORITIES.map((p) => (
                <option key={p} value={p}>
                  {p}
                </option>
              ))}
            </select>
          </Field>
        </div>
        <fieldset
          class={`choices${profileError ? " field-invalid" : ""}`}
          aria-describedby={profileError ? "execution_profile-error" : undefined}
        >
          <legend>Execution profile</legend>
          <label>
            <input
              type="radio"
              name="profile"
              value="standard"
              checked={profile === "standard"}
              onChange={() => setProfile("standard")}
            />
            <span>
              <strong>Standard</strong> — searches the whole database at once.
            </span>
          </label>
          <label>
            <input
              type="radio"
              name="profile"
              value="sharded"
              checked={profile === "sharded"}
              onChange={() => setProfile("sharded")}
            />
            <span>
              <strong>Sharded</strong> — searches the database's partitions one by one and merges them exactly; for
              databases larger than a node's memory.
            </span>
          </label>
          {profileError ? (
            <p class="field-error" id="execution_profile-error">
              {profileError}
            </p>
          ) : null}
        </fieldset>
        <fieldset class="options">
          <legend>BLAST options</legend>
          <div class="grid-3">{shown.filter((f) => f.basic).map(optionInput)}</div>
          <details
            open={moreOptionsOpen || moreOptionsRefused}
            onToggle={(e) => setMoreOptionsOpen(e.currentTarget.open)}
          >
            <summary>More options</summary>
            <div class="grid-3">{shown.filter((f) => !f.basic).map(optionInput)}</div>
          </details>
        </fieldset>
        <ErrorNotice
          error={submitError instanceof ApiError && submitError.status === 422 ? undefined : submitError}
          title="The search was not submitted:"
        />
        {submitError instanceof ApiError && submitError.status === 422 ? (
          <p class="field-error" role="alert">
            {refusedSummary(Object.keys(issues).length > 0, placed.top.length > 0)}
          </p>
        ) : null}
        <div class="actions">
          <button type="submit" class="primary" disabled={submitting || !chosenDb}>
            {submitting ? "Submitting…" : "Submit search"}
          </button>
        </div>
      </form>
    </section>
  );
}

/** Where the page shows the service's reasons for refusing a search. */
function refusedSummary(nextToFields: boolean, atTop: boolean): string {
  const where =
    nextToFields && atTop
      ? "next to the fields they name and at the top of the form"
      : atTop
        ? "at the top of the form"
        : "next to the fields they name";
  return `The service refused some fields: see the messages ${where}.`;
}

/** Moves focus to the first field marked invalid, after the render that marks it. */
function focusFirstInvalid(): void {
  requestAnimationFrame(() =>
    (
      document.querySelector<HTMLElement>("[aria-invalid='true']") ??
      document.querySelector<HTMLElement>("fieldset.field-invalid input:checked") ??
      document.querySelector<HTMLElement>("#submit-refusals")
    )?.focus(),
  );
}
