import { readFileSync } from "node:fs";
import type { z } from "zod";

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
 * stops start-up with a message an operator can act on.
 */
export function parseCatalog<S extends z.ZodType>(file: string, text: string, schema: S): z.output<S> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const line = lineAt(text, firstBadOffset(text));
    throw new CatalogLoadError(file, line, `not valid JSON: ${message}`);
  }
  const result = schema.safeParse(raw);
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

/** Reads and validates a catalog file (see {@link parseCatalog}). */
export function loadCatalogFile<S extends z.ZodType>(file: string, schema: S): z.output<S> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new CatalogLoadError(file, 1, `cannot be read: ${error instanceof Error ? error.message : String(error)}`);
  }
  return parseCatalog(file, text, schema);
}
