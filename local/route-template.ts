/**
 * Azure Functions HTTP route templates, matched the way the Functions host (ASP.NET Core routing)
 * matches them, so the local host dispatches the same requests to the same functions as Azure.
 *
 * A template is the function's `route` without the route prefix; a path is the request path after
 * the prefix has been stripped. Supported: literal segments (case-insensitive), `{name}`,
 * `{name?}`, `{name=default}`, catch-alls `{*name}` / `{**name}`, and inline constraints
 * (`int`, `long`, `bool`, `guid`, `alpha`, `minlength(n)`, `maxlength(n)`, `length(n)`,
 * `length(min,max)`, `min(n)`, `max(n)`, `range(a,b)`, `regex(...)`), chainable as `{id:int:min(1)}`.
 * Braces inside a parameter are escaped by doubling them, as in ASP.NET Core: `{code:regex(^\d{{3}}$)}`.
 * Complex segments mixing literals and parameters (`{name}.{ext}`) are not supported and rejected.
 */

/** A compiled route template. */
export interface CompiledRoute {
  /** The template as given. */
  template: string;
  /** Route values for `path` (prefix stripped, no leading slash), or null when it does not match. */
  match(path: string): Record<string, string> | null;
  /** How many segments are literals; more literals means a more specific route. */
  literalSegments: number;
}

type Constraint = (value: string) => boolean;

interface LiteralSegment {
  readonly kind: "literal";
  readonly text: string;
}

interface ParameterSegment {
  readonly kind: "parameter";
  readonly name: string;
  readonly optional: boolean;
  readonly catchAll: boolean;
  readonly defaultValue: string | undefined;
  readonly constraints: readonly Constraint[];
}

type Segment = LiteralSegment | ParameterSegment;

interface RankedRoute extends CompiledRoute {
  readonly constrainedParameters: number;
  readonly hasCatchAll: boolean;
}

const INT32_MIN = -(2n ** 31n);
const INT32_MAX = 2n ** 31n - 1n;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const INTEGER = /^[+-]?\d+$/;
const GUID_HEX = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const GUID = new RegExp(`^(?:${GUID_HEX}|\\{${GUID_HEX}\\}|\\(${GUID_HEX}\\)|[0-9a-f]{32})$`, "i");

/**
 * Compiles an Azure Functions route template.
 *
 * Matching rules: a trailing slash (and a leading one) on the path is ignored; parameter values are
 * percent-decoded, and a value with a malformed escape makes the route not match. An encoded slash
 * (`%2F`) stays inside its segment. A catch-all takes the rest of the path, slashes included, and
 * decodes it as a whole; when the rest is empty the parameter is omitted from the result (or set to
 * its default value if it has one). Absent optional parameters are omitted; absent parameters with
 * a default get the default. A parameter may only be left out when every segment after it may be
 * left out too. Constraints are not applied to absent parameters or to defaults.
 *
 * @throws Error when the template is malformed (unbalanced or unescaped braces, empty segments,
 * duplicate names, more than one catch-all or a catch-all that is not last, an optional parameter
 * followed by a required segment, unknown constraints, invalid constraint arguments or regexes).
 */
export function compileRouteTemplate(template: string): CompiledRoute {
  return compileRanked(template);
}

function compileRanked(template: string): RankedRoute {
  const segments = parseTemplate(template);
  // Index from which every segment may be absent; a path may end anywhere in [minSegments, length].
  let minSegments = segments.length;
  while (minSegments > 0) {
    const seg = segments[minSegments - 1];
    if (seg?.kind !== "parameter" || !(seg.optional || seg.catchAll || seg.defaultValue !== undefined)) break;
    minSegments--;
  }
  const params = segments.filter((s): s is ParameterSegment => s.kind === "parameter");
  return {
    template,
    literalSegments: segments.length - params.length,
    constrainedParameters: params.filter((p) => p.constraints.length > 0).length,
    hasCatchAll: params.some((p) => p.catchAll),
    match: (path) => matchSegments(segments, minSegments, path),
  };
}

function matchSegments(segments: readonly Segment[], minSegments: number, path: string): Record<string, string> | null {
  let trimmed = path.startsWith("/") ? path.slice(1) : path;
  if (trimmed.endsWith("/")) trimmed = trimmed.slice(0, -1);
  const parts = trimmed === "" ? [] : trimmed.split("/");
  const values: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!;
    if (seg.kind === "parameter" && seg.catchAll) {
      const rest = parts.slice(i).join("/");
      if (rest === "") {
        if (i < minSegments) return null;
        if (seg.defaultValue !== undefined) values[seg.name] = seg.defaultValue;
        return values;
      }
      const decoded = decode(rest);
      if (decoded === null || !seg.constraints.every((c) => c(decoded))) return null;
      values[seg.name] = decoded;
      return values;
    }
    const raw = parts[i];
    if (raw === undefined) {
      if (i < minSegments) return null;
      if (seg.kind === "parameter" && seg.defaultValue !== undefined) values[seg.name] = seg.defaultValue;
      continue;
    }
    if (raw === "") return null;
    const decoded = decode(raw);
    if (decoded === null) return null;
    if (seg.kind === "literal") {
      if (decoded.toLowerCase() !== seg.text.toLowerCase()) return null;
      continue;
    }
    if (!seg.constraints.every((c) => c(decoded))) return null;
    values[seg.name] = decoded;
  }
  return parts.length > segments.length ? null : values;
}

function decode(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

function parseTemplate(template: string): Segment[] {
  const fail = (reason: string): never => {
    throw new Error(`invalid route template "${template}": ${reason}`);
  };
  let body = template.startsWith("/") ? template.slice(1) : template;
  if (body.endsWith("/")) body = body.slice(0, -1);
  if (body === "") return [];

  const segments: Segment[] = [];
  const names = new Set<string>();
  let i = 0;
  let segStart = true;
  while (i <= body.length) {
    if (!segStart) fail("a parameter must occupy a whole segment (complex segments are not supported)");
    const ch = body[i];
    if (ch === undefined || ch === "/") fail("empty segment (consecutive or leading '/')");
    if (ch === "{") {
      const end = findParameterEnd(body, i + 1, fail);
      const param = parseParameter(body.slice(i + 1, end), fail);
      const key = param.name.toLowerCase();
      if (names.has(key)) fail(`duplicate parameter name "${param.name}"`);
      names.add(key);
      segments.push(param);
      i = end + 1;
    } else {
      let end = body.indexOf("/", i);
      if (end === -1) end = body.length;
      const text = body.slice(i, end);
      if (text.includes("{") || text.includes("}")) {
        fail(`unbalanced brace in literal segment "${text}" (complex segments are not supported)`);
      }
      if (text.includes("?")) fail(`literal segment "${text}" may not contain '?'`);
      segments.push({ kind: "literal", text });
      i = end;
    }
    if (i === body.length) break;
    if (body[i] !== "/") {
      segStart = false;
      continue;
    }
    i++;
  }

  let seenOptional: ParameterSegment | undefined;
  segments.forEach((seg, index) => {
    const isParam = seg.kind === "parameter";
    if (isParam && seg.catchAll && index !== segments.length - 1) {
      fail(
        segments.slice(index + 1).some((s) => s.kind === "parameter" && s.catchAll)
          ? "only one catch-all parameter is allowed"
          : `catch-all parameter "${seg.name}" must be the last segment`,
      );
    }
    if (isParam && seg.optional) {
      seenOptional ??= seg;
    } else if (seenOptional !== undefined && !(isParam && (seg.catchAll || seg.defaultValue !== undefined))) {
      fail(`optional parameter "${seenOptional.name}" is followed by a required segment`);
    }
  });
  return segments;
}

/** Index of the `}` closing the parameter whose content starts at `from`; `{{` and `}}` are escapes. */
function findParameterEnd(body: string, from: number, fail: (reason: string) => never): number {
  for (let i = from; i < body.length; i++) {
    const ch = body[i];
    if (ch === "{") {
      if (body[i + 1] !== "{") fail("unescaped '{' inside a parameter (double it as '{{')");
      i++;
    } else if (ch === "}") {
      if (body[i + 1] !== "}") return i;
      i++;
    }
  }
  return fail("unbalanced braces: parameter is missing its closing '}'");
}

function parseParameter(raw: string, fail: (reason: string) => never): ParameterSegment {
  const text = raw.replaceAll("{{", "{").replaceAll("}}", "}");
  let pos = 0;
  let catchAll = false;
  if (text.startsWith("**")) {
    catchAll = true;
    pos = 2;
  } else if (text.startsWith("*")) {
    catchAll = true;
    pos = 1;
  }
  const nameEnd = indexOfAny(text, [":", "=", "?"], pos);
  const name = text.slice(pos, nameEnd);
  if (name === "") fail(`parameter "{${raw}}" has no name`);
  if (/[*/(){}]/.test(name)) fail(`parameter name "${name}" contains an invalid character`);
  pos = nameEnd;

  const constraints: Constraint[] = [];
  while (text[pos] === ":") {
    const start = pos + 1;
    const open = text.indexOf("(", start);
    const plainEnd = indexOfAny(text, [":", "=", "?"], start);
    let spec: string;
    if (open !== -1 && open < plainEnd) {
      const close = findArgumentEnd(text, open + 1);
      if (close === -1) fail(`constraint in "{${raw}}" is missing its closing ')'`);
      spec = text.slice(start, close + 1);
      pos = close + 1;
    } else {
      spec = text.slice(start, plainEnd);
      pos = plainEnd;
    }
    constraints.push(buildConstraint(spec, name, fail));
  }

  let optional = false;
  let defaultValue: string | undefined;
  if (text[pos] === "?") {
    optional = true;
    pos++;
    if (text[pos] === "=") fail(`parameter "${name}" cannot be optional and have a default value`);
  } else if (text[pos] === "=") {
    defaultValue = text.slice(pos + 1);
    if (defaultValue.endsWith("?")) fail(`parameter "${name}" cannot be optional and have a default value`);
    pos = text.length;
  }
  if (pos !== text.length) {
    fail(`unexpected "${text.slice(pos)}" in parameter "${name}"`);
  }
  if (optional && catchAll) fail(`catch-all parameter "${name}" cannot be marked optional`);
  return { kind: "parameter", name, optional, catchAll, defaultValue, constraints };
}

/**
 * A constraint argument ends at a `)` followed by the end, `:` or `=`, or by a `?` that ends the
 * parameter (ASP.NET Core's rule), so regexes may contain `:` and `?`. Parentheses opened inside
 * the argument (outside character classes, unescaped) must be closed first, so `regex(^(a|b):c$)`
 * keeps its group; when no such `)` exists, the first one satisfying ASP.NET's rule is taken.
 */
function findArgumentEnd(text: string, from: number): number {
  const closesParameter = (i: number): boolean => {
    const next = text[i + 1];
    return next === undefined || next === ":" || next === "=" || (next === "?" && i + 2 === text.length);
  };
  let depth = 0;
  let inClass = false;
  for (let i = from; i < text.length; i++) {
    const ch = text[i];
    if (ch === "\\") i++;
    else if (inClass) inClass = ch !== "]";
    else if (ch === "[") inClass = true;
    else if (ch === "(") depth++;
    else if (ch === ")" && depth > 0) depth--;
    else if (ch === ")" && closesParameter(i)) return i;
  }
  for (let i = text.indexOf(")", from); i !== -1; i = text.indexOf(")", i + 1)) {
    if (closesParameter(i)) return i;
  }
  return -1;
}

function indexOfAny(text: string, chars: readonly string[], from: number): number {
  for (let i = from; i < text.length; i++) {
    if (chars.includes(text[i]!)) return i;
  }
  return text.length;
}

function buildConstraint(spec: string, param: string, fail: (reason: string) => never): Constraint {
  const open = spec.indexOf("(");
  const kind = (open === -1 ? spec : spec.slice(0, open)).toLowerCase();
  const arg = open === -1 ? undefined : spec.slice(open + 1, -1);
  const where = `constraint "${spec}" on parameter "${param}"`;
  const noArgs = (c: Constraint): Constraint => (arg === undefined ? c : fail(`${where} takes no arguments`));
  const ints = (count: number): bigint[] => {
    const pieces = arg === undefined ? [] : arg.split(",").map((p) => p.trim());
    if (pieces.length !== count || !pieces.every((p) => INTEGER.test(p))) {
      fail(`${where} needs ${count === 1 ? "an integer argument" : `${count} integer arguments`}`);
    }
    return pieces.map((p) => BigInt(p));
  };
  const length =
    (test: (n: number) => boolean): Constraint =>
    (v) =>
      test(v.length);

  switch (kind) {
    case "": {
      return fail(`empty constraint on parameter "${param}"`);
    }
    case "int":
      return noArgs((v) => inInteger(v, INT32_MIN, INT32_MAX));
    case "long":
      return noArgs((v) => inInteger(v, INT64_MIN, INT64_MAX));
    case "bool":
      return noArgs((v) => /^(?:true|false)$/i.test(v));
    case "guid":
      return noArgs((v) => GUID.test(v));
    case "alpha":
      return noArgs((v) => /^[a-z]*$/i.test(v));
    case "min": {
      const [min] = ints(1) as [bigint];
      return (v) => inInteger(v, min, INT64_MAX);
    }
    case "max": {
      const [max] = ints(1) as [bigint];
      return (v) => inInteger(v, INT64_MIN, max);
    }
    case "range": {
      const [min, max] = ints(2) as [bigint, bigint];
      if (min > max) fail(`${where}: minimum is greater than maximum`);
      return (v) => inInteger(v, min, max);
    }
    case "minlength": {
      const [min] = ints(1) as [bigint];
      if (min < 0n) fail(`${where}: length cannot be negative`);
      return length((n) => BigInt(n) >= min);
    }
    case "maxlength": {
      const [max] = ints(1) as [bigint];
      if (max < 0n) fail(`${where}: length cannot be negative`);
      return length((n) => BigInt(n) <= max);
    }
    case "length": {
      const bounds = ints(arg?.includes(",") ? 2 : 1);
      const min = bounds[0]!;
      const max = bounds[1] ?? min;
      if (min < 0n || min > max) fail(`${where}: invalid length bounds`);
      return length((n) => BigInt(n) >= min && BigInt(n) <= max);
    }
    case "regex": {
      if (arg === undefined || arg === "") return fail(`${where} needs a pattern`);
      let re: RegExp;
      try {
        // Case-insensitive like ASP.NET Core's RegexRouteConstraint; anchored so it must match the whole value.
        re = new RegExp(`^(?:${arg})$`, "i");
      } catch (err) {
        return fail(`${where} has an invalid pattern: ${(err as Error).message}`);
      }
      return (v) => re.test(v);
    }
    default:
      return fail(`unsupported ${where}`);
  }
}

function inInteger(value: string, min: bigint, max: bigint): boolean {
  if (!INTEGER.test(value)) return false;
  const n = BigInt(value);
  return n >= min && n <= max;
}

/** Outcome of looking a request up in a {@link createRouteTable} table. */
export type RouteLookup<T> =
  | { kind: "match"; value: T; params: Record<string, string> }
  | { kind: "method-not-allowed"; allowed: string[] }
  | { kind: "not-found" };

/** One function's HTTP registration: its route template, accepted methods and payload. */
export interface RouteEntry<T> {
  template: string;
  /** Accepted methods, case-insensitive. An empty list accepts every method, as in Azure. */
  methods: string[];
  value: T;
}

/**
 * Builds the dispatch table of the local host from every HTTP function's route and methods.
 *
 * Among the templates matching a path and accepting the method, the most specific wins: more
 * literal segments, then more constrained parameters, then no catch-all; remaining ties go to the
 * earlier registration. `HEAD` is not implied by `GET`, because Azure requires it to be listed.
 * When templates match the path but none accepts the method, the result lists the union of their
 * methods (uppercase, sorted) for the `Allow` header.
 *
 * @throws Error when a template is invalid (see {@link compileRouteTemplate}).
 */
export function createRouteTable<T>(entries: RouteEntry<T>[]): { find(method: string, path: string): RouteLookup<T> } {
  const routes = entries.map((entry, order) => ({
    route: compileRanked(entry.template),
    methods: new Set(entry.methods.map((m) => m.toUpperCase())),
    value: entry.value,
    order,
  }));
  routes.sort(
    (a, b) =>
      b.route.literalSegments - a.route.literalSegments ||
      b.route.constrainedParameters - a.route.constrainedParameters ||
      Number(a.route.hasCatchAll) - Number(b.route.hasCatchAll) ||
      a.order - b.order,
  );
  return {
    find(method, path) {
      const wanted = method.toUpperCase();
      const allowed = new Set<string>();
      for (const candidate of routes) {
        const params = candidate.route.match(path);
        if (params === null) continue;
        if (candidate.methods.size === 0 || candidate.methods.has(wanted)) {
          return { kind: "match", value: candidate.value, params };
        }
        for (const m of candidate.methods) allowed.add(m);
      }
      if (allowed.size === 0) return { kind: "not-found" };
      return { kind: "method-not-allowed", allowed: [...allowed].sort() };
    },
  };
}
