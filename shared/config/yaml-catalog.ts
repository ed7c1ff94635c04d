import { readFileSync } from "node:fs";
import { LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { CatalogLoadError, catalogDigest } from "../ops/catalog/json-catalog.js";
import { ONE_OFF_PARSE } from "./env.js";

/**
 * Suffix of the YAML file's parse made at build time: `<file>.yaml` ships with
 * `<file>.yaml.parsed.json` (`{ sha256, value }`, scripts/build.mjs), so the app's start does not
 * run the YAML parser on the files it ships (decision 0016).
 */
export const PARSED_SUFFIX = ".parsed.json";

/** The YAML parse options of every catalog, at build time and at start alike. */
export const YAML_CATALOG_OPTIONS = { prettyErrors: false, uniqueKeys: true } as const;

/** The build-time parse of `file` when one lies beside it and was made from exactly `text`. */
function parsedAtBuild(file: string, text: string): { value: unknown } | undefined {
  let parsed: { sha256?: unknown; value?: unknown };
  try {
    parsed = JSON.parse(readFileSync(`${file}${PARSED_SUFFIX}`, "utf8")) as typeof parsed;
  } catch {
    return undefined;
  }
  return parsed.sha256 === catalogDigest(text) ? { value: parsed.value } : undefined;
}

/**
 * Parses a YAML catalog and validates it with `schema`. A YAML error or the first field failing
 * its rule is a {@link CatalogLoadError} `file:line: field.path: problem`, the line being the bad
 * value's (or, for a missing key, its map's), so a bad catalog stops start-up pointing at the line.
 * A file as the build shipped it (its digest matches the parse beside it) is validated from that
 * parse; any other text (a file changed after the build, another folder's) is parsed here.
 */
export function parseYamlCatalog<S extends z.ZodType>(file: string, text: string, schema: S): z.output<S> {
  const shipped = parsedAtBuild(file, text);
  if (shipped) {
    const result = schema.safeParse(shipped.value ?? {}, ONE_OFF_PARSE);
    if (result.success) return result.data;
    // A shipped file the schema refuses: parsed again below, for the line of the problem.
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, ...YAML_CATALOG_OPTIONS });
  const lineOf = (offset: number | undefined) => (offset === undefined ? 1 : lines.linePos(offset).line);
  const yamlError = doc.errors[0];
  if (yamlError)
    throw new CatalogLoadError(file, lineOf(yamlError.pos[0]), `not valid YAML: ${yamlError.message.split("\n")[0]}`);
  const result = schema.safeParse(doc.toJS() ?? {}, ONE_OFF_PARSE);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const path = (issue?.path ?? []).map((p) => (typeof p === "symbol" ? String(p) : p));
  // The deepest node of the path that exists: the bad value, or the map missing the key.
  let node: unknown;
  for (let n = path.length; n >= 0 && !node; n--) node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
  const range = (node as { range?: [number, number, number] } | undefined)?.range;
  throw new CatalogLoadError(
    file,
    lineOf(range?.[0]),
    `${path.length ? `${path.join(".")}: ` : ""}${issue?.message ?? "invalid"}`,
  );
}
