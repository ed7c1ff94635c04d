import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import type { z } from "zod";
import { ONE_OFF_PARSE } from "../../config/env.js";

/**
 * Suffix of a JSON catalog's validation made at build time: `<file>.json` ships with
 * `<file>.json.validated.json` (`{ sha256, dependencies, value }`, scripts/build.mjs), so the
 * app's start does not run zod over the catalogs it ships (decision 0016).
 */
export const VALIDATED_SUFFIX = ".validated.json";

/** SHA-256 (hex) of a catalog's text, or of what it depends on, as the build records it. */
export const catalogDigest = (text: string) => createHash("sha256").update(text).digest("hex");

/**
 * What a catalog's validation depends on beyond its own text, by name: the digest of each
 * (e.g. the rule catalog's proposed actions are checked against the action-type catalog, so it
 * depends on that catalog's validated content, {@link dependencyDigest}).
 */
export type CatalogDependencies = Readonly<Record<string, string>>;

/** The digest of a catalog another one depends on: of its validated content, however it was loaded. */
export const dependencyDigest = (value: unknown) => catalogDigest(JSON.stringify(value));

/** What the build writes beside a shipped catalog: the digests it was validated from and the result. */
export interface ValidatedCatalog {
  sha256: string;
  dependencies: CatalogDependencies;
  value: unknown;
}

function sameDependencies(recorded: unknown, now: CatalogDependencies): boolean {
  if (recorded === null || typeof recorded !== "object") return false;
  const names = Object.keys(now);
  const was = recorded as Record<string, unknown>;
  return Object.keys(was).length === names.length && names.every((name) => was[name] === now[name]);
}

/**
 * The build-time validation of `file` when one lies beside it, made from exactly `text` and
 * exactly `dependencies`; otherwise undefined (the catalog is then validated at start).
 */
function validatedAtBuild(
  file: string,
  text: string,
  dependencies: CatalogDependencies,
): { value: unknown } | undefined {
  let shipped: Partial<ValidatedCatalog>;
  try {
    shipped = JSON.parse(readFileSync(`${file}${VALIDATED_SUFFIX}`, "utf8")) as Partial<ValidatedCatalog>;
  } catch {
    return undefined;
  }
  if (shipped.sha256 !== catalogDigest(text) || !sameDependencies(shipped.dependencies, dependencies)) return undefined;
  return "value" in shipped ? { value: shipped.value } : undefined;
}

/** A catalog file that cannot be used: names the file and the 1-based line of the first problem. */
export class CatalogLoadError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly problem: string,
  ) {
    super(`${file}:${line}: ${problem}`);
    this.name = "CatalogLoadError";
  }
}

function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset && i < text.length; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** True when `prefix` could still begin a valid JSON document (parses, or only ends too early). */
function viablePrefix(prefix: string): boolean {
  try {
    JSON.parse(prefix);
    return true;
  } catch (error) {
    return error instanceof SyntaxError && /end of JSON input|Unterminated string/i.test(error.message);
  }
}

/**
 * The offset of the first character that makes `text` invalid JSON: the longest viable prefix,
 * found by bisection (viability is monotone in the prefix length). Node's parse errors do not
 * always carry a position, and the line is what an operator needs.
 */
function firstBadOffset(text: string): number {
  let good = 0;
  let bad = text.length;
  while (bad - good > 1) {
    const mid = (good + bad) >> 1;
    if (viablePrefix(text.slice(0, mid))) good = mid;
    else bad = mid;
  }
  return good;
}

/**
 * The text offset where the value at `path` starts in `text` (already known to be valid JSON),
 * or the offset of the deepest existing parent. A small scanner instead of a JSON library with
 * positions: catalogs are a few kilobytes and this is only used to report an error.
 */
function offsetOfPath(text: string, path: readonly PropertyKey[]): number {
  let i = 0;
  const skipWs = () => {
    while (i < text.length && /\s/.test(text[i] as string)) i++;
  };
  const skipString = () => {
    i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
  };
  const readString = (): string => {
    const start = i;
    skipString();
    return JSON.parse(text.slice(start, i)) as string;
  };
  const skipValue = () => {
    skipWs();
    const c = text[i];
    if (c === '"') return skipString();
    if (c === "{" || c === "[") {
      let depth = 0;
      do {
        const d = text[i];
        if (d === '"') {
          skipString();
          continue;
        }
        if (d === "{" || d === "[") depth++;
        if (d === "}" || d === "]") depth--;
        i++;
      } while (depth > 0 && i < text.length);
      return;
    }
    while (i < text.length && !/[,\]}\s]/.test(text[i] as string)) i++;
  };
  skipWs();
  let found = i;
  for (const key of path) {
    skipWs();
    const open = text[i];
    if (open === "{") {
      i++;
      let hit = false;
      for (;;) {
        skipWs();
        if (text[i] !== '"') break;
        const name = readString();
        skipWs();
        i++; // the colon
        skipWs();
        if (name === String(key)) {
          hit = true;
          break;
        }
        skipValue();
        skipWs();
        if (text[i] === ",") i++;
      }
      if (!hit) return found;
    } else if (open === "[" && typeof key === "number") {
      i++;
      for (let n = 0; n < key; n++) {
        skipValue();
        skipWs();
        if (text[i] !== ",") return found;
        i++;
      }
      skipWs();
    } else return found;
    found = i;
  }
  return found;
}

/**
 * Parses a versioned JSON catalog and validates it with `schema`. Any problem — unreadable JSON or a
 * field failing its rule — is a {@link CatalogLoadError} naming the file and line, so a bad catalog
 * stops start-up with a message an operator can act on. A catalog as the build shipped it (its
 * text and `dependencies` have the digests recorded beside it) is taken from the build's
 * validation; any other (changed after the build, another folder's) is validated here.
 */
export function parseCatalog<S extends z.ZodType>(
  file: string,
  text: string,
  schema: S,
  dependencies: CatalogDependencies = {},
): z.output<S> {
  const shipped = validatedAtBuild(file, text, dependencies);
  if (shipped) return shipped.value as z.output<S>;
  return validateCatalog(file, text, schema);
}

/** {@link parseCatalog} without the build's validation: always parses and validates `text`. */
export function validateCatalog<S extends z.ZodType>(file: string, text: string, schema: S): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const line = lineAt(text, firstBadOffset(text));
    throw new CatalogLoadError(file, line, `not valid JSON: ${message}`);
  }
  const result = schema.safeParse(raw, ONE_OFF_PARSE);
  if (!result.success) {
    const issue = result.error.issues[0];
    const where = issue ? issue.path.join(".") : "";
    throw new CatalogLoadError(
      file,
      lineAt(text, offsetOfPath(text, issue?.path ?? [])),
      `${where ? `${where}: ` : ""}${issue?.message ?? "invalid"}`,
    );
  }
  return result.data;
}

/** Reads a catalog file; one that cannot be read is a {@link CatalogLoadError} at line 1. */
export function readCatalogText(file: string): string {
  try {
    return readFileSync(file, "utf8");
  } catch (error) {
    throw new CatalogLoadError(file, 1, `cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Reads and validates a catalog file (see {@link parseCatalog}). */
export function loadCatalogFile<S extends z.ZodType>(
  file: string,
  schema: S,
  dependencies: CatalogDependencies = {},
): z.output<S> {
  return parseCatalog(file, readCatalogText(file), schema, dependencies);
}
