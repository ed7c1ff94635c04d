import type { z } from "zod";
import { type FieldIssue, InvalidRequestError, PayloadTooLargeError, ValidationError } from "../errors.js";
import { type BodyStream, readBodyText } from "./read-body.js";

/** Where a field came from, as the first element of `loc` (FastAPI style: body, query, path). */
export type FieldSource = "body" | "query" | "path" | "header";

/** The value at `path` inside `data`, or undefined when any step is absent. */
function valueAt(data: unknown, path: readonly PropertyKey[]): unknown {
  let current: unknown = data;
  for (const key of path) {
    if (current === null || typeof current !== "object") return undefined;
    current = (current as Record<PropertyKey, unknown>)[key];
  }
  return current;
}

/** Maps one zod issue to the spec's `{loc, msg, type}`, using stable snake_case type names. */
function issueType(issue: z.core.$ZodIssue, missing: boolean): string {
  switch (issue.code) {
    case "invalid_type":
      return missing ? "missing" : `${issue.expected}_type`;
    case "too_small":
      return issue.origin === "string" || issue.origin === "array" ? "too_short" : "greater_than_equal";
    case "too_big":
      return issue.origin === "string" || issue.origin === "array" ? "too_long" : "less_than_equal";
    case "invalid_value":
      return missing ? "missing" : "enum";
    case "invalid_format":
      return "string_pattern_mismatch";
    case "unrecognized_keys":
      return "extra_forbidden";
    case "not_multiple_of":
      return "multiple_of";
    default:
      return "value_error";
  }
}

/**
 * Turns a zod error into field issues; unknown keys get one issue each, naming the key. `input` is
 * the validated data, used to tell a missing field from a wrong one (zod 4 issues omit the input).
 */
export function zodIssues(error: z.ZodError, source: FieldSource, input: unknown): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const issue of error.issues) {
    const path = issue.path.map((p) => (typeof p === "symbol" ? String(p) : p));
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys) {
        out.push({ loc: [source, ...path, key], msg: `unknown field '${key}'`, type: "extra_forbidden" });
      }
      continue;
    }
    // An absent enum or literal field is as missing as an absent string (zod reports it as invalid_value).
    const missing =
      (issue.code === "invalid_type" || issue.code === "invalid_value") && valueAt(input, issue.path) === undefined;
    out.push({
      loc: [source, ...path],
      msg: missing ? "field required" : issue.message,
      type: issueType(issue, missing),
    });
  }
  return out;
}

/** The subset of an HTTP request the kit needs; `@azure/functions`' HttpRequest satisfies it. */
export interface HttpRequestLike {
  readonly method: string;
  readonly url: string;
  readonly headers: Headers;
  readonly query: URLSearchParams;
  readonly params: Record<string, string>;
  /** The body as a stream, when the transport has one (the Functions app): read counting bytes. */
  readonly body?: BodyStream | null;
  text(): Promise<string>;
}

export const DEFAULT_JSON_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * Reads and validates a JSON body: wrong content type or unparseable JSON → 400, over the limit
 * → 413, fields failing the schema → 422 listing each field.
 */
export async function parseJsonBody<S extends z.ZodType>(
  request: HttpRequestLike,
  schema: S,
  limitBytes = DEFAULT_JSON_BODY_LIMIT_BYTES,
): Promise<z.output<S>> {
  const contentType = request.headers.get("content-type") ?? "";
  if (!/^application\/(?:[\w.+-]+\+)?json\b/i.test(contentType)) {
    throw new InvalidRequestError("content type must be application/json");
  }
  const declared = Number(request.headers.get("content-length") ?? "0");
  if (declared > limitBytes) throw new PayloadTooLargeError(limitBytes);
  // Counted while read, whatever the framing: a chunked upload has no Content-Length to check.
  const text = request.body !== undefined ? await readBodyText(request.body, limitBytes) : await request.text();
  if (Buffer.byteLength(text) > limitBytes) throw new PayloadTooLargeError(limitBytes);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new InvalidRequestError("request body is not valid JSON");
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(zodIssues(parsed.error, "body", raw));
  return parsed.data;
}

/**
 * Validates query parameters (first value of each name). A required parameter that is missing is
 * 422 (a field error); a present but malformed one is 400 (a malformed parameter).
 */
export function parseQuery<S extends z.ZodType>(request: HttpRequestLike, schema: S): z.output<S> {
  const raw: Record<string, string> = {};
  for (const [k, v] of request.query) if (!(k in raw)) raw[k] = v;
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issues = zodIssues(parsed.error, "query", raw);
  if (issues.every((i) => i.type === "missing")) throw new ValidationError(issues);
  const bad = issues.find((i) => i.type !== "missing");
  throw new InvalidRequestError(`invalid query parameter '${String(bad?.loc[1] ?? "")}': ${bad?.msg ?? ""}`);
}

/** Validates path parameters; anything malformed is 400. */
export function parsePath<S extends z.ZodType>(request: HttpRequestLike, schema: S): z.output<S> {
  const parsed = schema.safeParse(request.params);
  if (parsed.success) return parsed.data;
  const first = zodIssues(parsed.error, "path", request.params)[0];
  throw new InvalidRequestError(`invalid path parameter '${String(first?.loc[1] ?? "")}': ${first?.msg ?? ""}`);
}
