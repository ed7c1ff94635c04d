import { LineCounter, parseDocument } from "yaml";
import type { z } from "zod";
import { CatalogLoadError } from "../ops/catalog/json-catalog.js";

/**
 * Parses a YAML catalog and validates it with `schema`. A YAML error or the first field failing
 * its rule is a {@link CatalogLoadError} `file:line: field.path: problem`, the line being the bad
 * value's (or, for a missing key, its map's), so a bad catalog stops start-up pointing at the line.
 */
export function parseYamlCatalog<S extends z.ZodType>(file: string, text: string, schema: S): z.output<S> {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const lineOf = (offset: number | undefined) => (offset === undefined ? 1 : lines.linePos(offset).line);
  const yamlError = doc.errors[0];
  if (yamlError)
    throw new CatalogLoadError(file, lineOf(yamlError.pos[0]), `not valid YAML: ${yamlError.message.split("\n")[0]}`);
  const result = schema.safeParse(doc.toJS() ?? {});
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
