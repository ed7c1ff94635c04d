import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import { CatalogLoadError, parseCatalog } from "../catalog/json-catalog.js";

/** Where an observed field comes from: the AKS managed cluster, the app's storage account, the app's own settings. */
export const OBSERVATION_SOURCES = ["aks", "storage_account", "settings"] as const;
export type ObservationSource = (typeof OBSERVATION_SOURCES)[number];

export const sha256Hex = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

const citationSchema = z.strictObject({
  id: z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/),
  /**
   * The document: the contract's `blast-control-plane.md`, `operator-console.md` or `DESIGN.md` (beside
   * the repository), or one of the repository's own, `README.md` or a path under `docs/`.
   */
  document: z.union([
    z.enum(["blast-control-plane.md", "operator-console.md", "DESIGN.md", "README.md"]),
    z.string().regex(/^docs\/[a-z0-9][a-z0-9-]*(\/[a-z0-9][a-z0-9-]*)*\.md$/, "must be README.md or a docs/ path"),
  ]),
  section: z.string().min(1).max(200),
  /** The cited words, verbatim (whitespace may differ from the document's line breaks). */
  excerpt: z.string().min(1).max(1000),
  /** SHA-256 of `excerpt` (UTF-8, hex): the citation's integrity pin, checked at load. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** What an observed value must be: exactly a value, within bounds, or a list holding an item. */
const expectationRule = z.union([
  z.strictObject({ equals: z.union([z.string(), z.number(), z.boolean()]) }),
  z
    .strictObject({ at_least: z.number().optional(), at_most: z.number().optional() })
    .refine((r) => r.at_least !== undefined || r.at_most !== undefined, "give at_least, at_most or both"),
  z.strictObject({ includes: z.string() }),
]);

const expectationSchema = z.strictObject({
  id: z.string().regex(/^[a-z][a-z0-9_.]{0,99}$/),
  title: z.string().min(1).max(200),
  source: z.enum(OBSERVATION_SOURCES),
  /** The observed field the rule applies to (a key of the source's observations). */
  field: z.string().regex(/^[a-z][a-z0-9_.]{0,99}$/),
  expect: expectationRule,
  citations: z.array(z.string()).min(1),
});
export type BaselineExpectation = z.output<typeof expectationSchema>;

export const configurationBaselineSchema = z
  .strictObject({
    version: z.number().int().min(1),
    baseline_id: z.string().regex(/^[a-z][a-z0-9-]{0,63}$/),
    description: z.string().min(1).max(500),
    expectations: z.array(expectationSchema).min(1),
    citations: z.array(citationSchema).min(1),
  })
  .superRefine((b, ctx) => {
    const ids = new Set<string>();
    b.citations.forEach((c, i) => {
      if (ids.has(c.id))
        ctx.addIssue({ code: "custom", path: ["citations", i, "id"], message: `duplicate citation id ${c.id}` });
      ids.add(c.id);
      // The pin: an excerpt edited without its digest (or a digest edited alone) refuses to load.
      if (sha256Hex(c.excerpt) !== c.sha256)
        ctx.addIssue({
          code: "custom",
          path: ["citations", i, "sha256"],
          message: `does not match the SHA-256 of citation ${c.id}'s excerpt`,
        });
    });
    const seen = new Set<string>();
    b.expectations.forEach((e, i) => {
      if (seen.has(e.id))
        ctx.addIssue({ code: "custom", path: ["expectations", i, "id"], message: `duplicate expectation id ${e.id}` });
      seen.add(e.id);
      e.citations.forEach((c, j) => {
        if (!ids.has(c))
          ctx.addIssue({
            code: "custom",
            path: ["expectations", i, "citations", j],
            message: `cites ${c}, which is not in citations`,
          });
      });
    });
  });

/** The frozen baseline as loaded: its content and the SHA-256 of the file it came from. */
export type ConfigurationBaseline = z.output<typeof configurationBaselineSchema> & { digest: string };

/**
 * Loads `config/configuration-baseline.json`: validated with zod like the other catalogs, every
 * citation's digest checked against its excerpt. A bad file or a digest mismatch throws a
 * CatalogLoadError naming the file and line, which stops start-up.
 */
export function loadConfigurationBaseline(file: string): ConfigurationBaseline {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new CatalogLoadError(file, 1, `cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return Object.freeze({ ...parseCatalog(file, text, configurationBaselineSchema), digest: sha256Hex(text) });
}

/** One source's observations now: its fields, or why it could not be observed. */
export type SourceObservation =
  | { status: "observed"; scope: string; fields: Record<string, unknown> }
  | { status: "unobserved"; reason: string };

/** Observes one source (ARM, Resource Graph, the app's settings). */
export type BaselineObserver = () => Promise<SourceObservation>;

export const CONFIGURATION_BASELINE_SCHEMA_VERSION = 1;

function conforms(rule: BaselineExpectation["expect"], value: unknown): boolean {
  if ("equals" in rule) return value === rule.equals;
  if ("includes" in rule) return Array.isArray(value) && value.includes(rule.includes);
  if (typeof value !== "number") return false;
  return (
    (rule.at_least === undefined || value >= rule.at_least) && (rule.at_most === undefined || value <= rule.at_most)
  );
}

/**
 * Compares the baseline with what each source observes now: one finding per expectation
 * (`conforms`, `drift` with the observed value, or `unobserved` with the reason), the three parts
 * of the answer (baseline with its version and digest, observations, citations with their digests).
 */
export async function evaluateBaseline(
  baseline: ConfigurationBaseline,
  observers: Partial<Record<ObservationSource, BaselineObserver>>,
): Promise<Record<string, unknown>> {
  const observed = Object.fromEntries(
    await Promise.all(
      OBSERVATION_SOURCES.map(async (source): Promise<[ObservationSource, SourceObservation]> => {
        const observe = observers[source];
        if (!observe)
          return [source, { status: "unobserved", reason: "no provider observes this source in this deployment" }];
        try {
          return [source, await observe()];
        } catch {
          return [source, { status: "unobserved", reason: "the source did not answer" }];
        }
      }),
    ),
  ) as Record<ObservationSource, SourceObservation>;
  const findings = baseline.expectations.map((e) => {
    const o = observed[e.source];
    const base = {
      expectation_id: e.id,
      title: e.title,
      source: e.source,
      field: e.field,
      expected: e.expect,
      citations: e.citations,
    };
    if (o.status === "unobserved") return { ...base, status: "unobserved" as const, reason: o.reason };
    if (!(e.field in o.fields))
      return { ...base, status: "unobserved" as const, reason: `${e.source} does not report ${e.field}` };
    const value = o.fields[e.field];
    return {
      ...base,
      status: conforms(e.expect, value) ? ("conforms" as const) : ("drift" as const),
      observed: value ?? null,
    };
  });
  return {
    baseline: {
      baseline_id: baseline.baseline_id,
      version: baseline.version,
      digest: `sha256:${baseline.digest}`,
      description: baseline.description,
      expectations: baseline.expectations,
    },
    observations: observed,
    drift_findings: findings.filter((f) => f.status === "drift"),
    findings,
    summary: {
      conforms: findings.filter((f) => f.status === "conforms").length,
      drift: findings.filter((f) => f.status === "drift").length,
      unobserved: findings.filter((f) => f.status === "unobserved").length,
    },
    citations: baseline.citations.map((c) => ({
      id: c.id,
      document: c.document,
      section: c.section,
      excerpt: c.excerpt,
      sha256: c.sha256,
    })),
  };
}
