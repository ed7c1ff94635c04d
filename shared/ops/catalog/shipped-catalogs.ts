import path from "node:path";
import type { z } from "zod";
import { browserEvidencePolicyCatalogSchema } from "../../console/providers/browser-evidence-policies.js";
import { healthMetricSetSchema } from "../../console/providers/health-metrics.js";
import { type ActionTypeCatalog, actionTypeCatalogSchema } from "../actions/action-types.js";
import { ruleCatalogDependencies, ruleCatalogSchemaFor } from "../rules/rule-catalog.js";
import { configurationBaselineSchema } from "../snapshots/configuration-baseline.js";
import {
  CatalogLoadError,
  type CatalogDependencies,
  catalogDigest,
  readCatalogText,
  type ValidatedCatalog,
  validateCatalog,
} from "./json-catalog.js";

/**
 * The JSON catalogs the Functions app ships in `config/`, each with the schema its loader
 * validates it with and what that validation depends on beyond the file's text. The build
 * (scripts/build.mjs) validates each here and writes `<file>.validated.json` beside the shipped
 * copy; the loaders take that result when the digests still match (decision 0016). Build time only:
 * the app itself does not import this module.
 */
interface ShippedCatalog {
  file: string;
  /** The schema and dependencies of the file in `dir`, as its loader at start sees them. */
  validation(dir: string): { schema: z.ZodType; dependencies: CatalogDependencies };
}

const actionTypesIn = (dir: string): ActionTypeCatalog =>
  validateCatalog(
    path.join(dir, "action-types.json"),
    readCatalogText(path.join(dir, "action-types.json")),
    actionTypeCatalogSchema,
  );

export const SHIPPED_JSON_CATALOGS: readonly ShippedCatalog[] = [
  { file: "action-types.json", validation: () => ({ schema: actionTypeCatalogSchema, dependencies: {} }) },
  {
    file: "ops-rules.json",
    validation: (dir) => {
      const actions = actionTypesIn(dir);
      return { schema: ruleCatalogSchemaFor(actions), dependencies: ruleCatalogDependencies(actions) };
    },
  },
  { file: "health-metrics.json", validation: () => ({ schema: healthMetricSetSchema, dependencies: {} }) },
  {
    file: "configuration-baseline.json",
    validation: () => ({ schema: configurationBaselineSchema, dependencies: {} }),
  },
  {
    file: "browser-evidence-policies.json",
    validation: () => ({ schema: browserEvidencePolicyCatalogSchema, dependencies: {} }),
  },
];

/**
 * Validates every shipped catalog in `dir` and returns, by file name, what the build writes beside
 * it. A catalog that does not validate (or whose dependency does not) gets nothing: start-up
 * validates it and stops naming its file and line, as for any changed catalog.
 */
export function validateShippedCatalogs(dir: string): Record<string, ValidatedCatalog> {
  const out: Record<string, ValidatedCatalog> = {};
  for (const catalog of SHIPPED_JSON_CATALOGS) {
    const file = path.join(dir, catalog.file);
    try {
      const text = readCatalogText(file);
      const { schema, dependencies } = catalog.validation(dir);
      out[catalog.file] = { sha256: catalogDigest(text), dependencies, value: validateCatalog(file, text, schema) };
    } catch (error) {
      if (!(error instanceof CatalogLoadError)) throw error;
    }
  }
  return out;
}
