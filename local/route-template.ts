import { METHOD_NAME_ALL } from "hono/router";
import { TrieRouter } from "hono/router/trie-router";

/**
 * The local Functions host's dispatch table for Azure Functions HTTP route templates, matched the
 * way the Functions host (ASP.NET Core routing) matches the templates this app and its test fixture
 * use, so the local host dispatches the same requests to the same functions as Azure. Hono's router
 * does the matching (`{x}` becomes `:x`, as `jobapi/http.ts` converts its OpenAPI templates).
 *
 * A template is the function's `route` without the route prefix; a path is the request path after
 * the prefix has been stripped. Supported, as in Azure: literal segments (compared
 * case-insensitively, after percent-decoding), `{name}`, trailing optional `{name?}`, and the `int`
 * constraint (`{count:int}`, a 32-bit integer). Azure's other forms — defaults, catch-alls, the
 * other constraints, complex segments — are refused when the table is built, naming the template:
 * no route uses them, and a route that starts to will say so at start rather than match differently
 * here than in Azure.
 */

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

interface Parameter {
  /** The parameter's name as written. */
  readonly name: string;
  /** Its segment's position in the path. */
  readonly index: number;
  readonly int: boolean;
}

interface CompiledTemplate {
  /** The template in Hono's syntax, literals lower-cased. */
  readonly honoPath: string;
  readonly parameters: readonly Parameter[];
  readonly literalSegments: number;
  readonly constrainedParameters: number;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const INT32 = /^[+-]?\d+$/;

/** A template in Hono's syntax, or an Error naming the template and what is not supported. */
export function compileRouteTemplate(template: string): CompiledTemplate {
  const fail = (reason: string): never => {
    throw new Error(`invalid route template "${template}": ${reason}`);
  };
  const trimmed = template.replace(/^\/+|\/+$/g, "");
  if (trimmed === "") return { honoPath: "/", parameters: [], literalSegments: 0, constrainedParameters: 0 };
  const segments = trimmed.split("/");
  const parameters: Parameter[] = [];
  const seen = new Set<string>();
  let optionalSeen = false;
  const hono = segments.map((segment, index) => {
    if (segment === "") return fail("empty segment");
    const parameter = /^\{([^{}]*)\}$/.exec(segment);
    if (parameter === null) {
      if (/[{}?]/.test(segment)) return fail(`segment "${segment}" is not supported by the local Functions host`);
      if (optionalSeen) return fail("an optional parameter must not be followed by a required segment");
      return lookupSegment(decodeSegment(segment) ?? fail(`segment "${segment}" has a malformed escape`));
    }
    const body = parameter[1] ?? "";
    const optional = body.endsWith("?");
    const [name = "", ...constraints] = (optional ? body.slice(0, -1) : body).split(":");
    if (!NAME.test(name)) fail(`parameter "${segment}" is not supported by the local Functions host`);
    if (seen.has(name.toLowerCase())) fail(`duplicate parameter name "${name}"`);
    seen.add(name.toLowerCase());
    if (constraints.some((c) => c !== "int") || constraints.length > 1)
      fail(`constraint "${constraints.join(":")}" is not supported by the local Functions host (only int)`);
    if (optionalSeen && !optional) fail("an optional parameter must not be followed by a required segment");
    optionalSeen ||= optional;
    const int = constraints.length === 1;
    parameters.push({ name, index, int });
    return `:${name}${int ? "{[+-]?[0-9]+}" : ""}${optional ? "?" : ""}`;
  });
  return {
    honoPath: `/${hono.join("/")}`,
    parameters,
    literalSegments: segments.length - parameters.length,
    constrainedParameters: parameters.filter((p) => p.int).length,
  };
}

/** A decoded segment as the router sees it: lower-cased, its `%` and `/` escaped so it stays one segment. */
function lookupSegment(decoded: string): string {
  return decoded.toLowerCase().replace(/%/g, "%25").replace(/\//g, "%2F");
}

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/**
 * Builds the dispatch table of the local host from every HTTP function's route and methods.
 *
 * Among the templates matching a path and accepting the method, the most specific wins: more
 * literal segments, then more constrained parameters; remaining ties go to the earlier
 * registration. `HEAD` is not implied by `GET`, because Azure requires it to be listed. When
 * templates match the path but none accepts the method, the result lists the union of their
 * methods (uppercase, sorted) for the `Allow` header. A trailing (or leading) slash on the path is
 * ignored; parameter values are percent-decoded (an encoded slash stays inside its segment), and a
 * path with a malformed escape matches nothing.
 *
 * @throws Error when a template is not one the local host supports (see {@link compileRouteTemplate}).
 */
export function createRouteTable<T>(entries: RouteEntry<T>[]): { find(method: string, path: string): RouteLookup<T> } {
  const routes = entries.map((entry, order) => ({
    compiled: compileRouteTemplate(entry.template),
    methods: new Set(entry.methods.map((m) => m.toUpperCase())),
    value: entry.value,
    order,
  }));
  const router = new TrieRouter<number>();
  routes.forEach((route, i) => {
    router.add(METHOD_NAME_ALL, route.compiled.honoPath, i);
  });
  const rank = (a: (typeof routes)[number], b: (typeof routes)[number]) =>
    b.compiled.literalSegments - a.compiled.literalSegments ||
    b.compiled.constrainedParameters - a.compiled.constrainedParameters ||
    a.order - b.order;
  return {
    find(method, path) {
      const raw = path.replace(/^\/+|\/+$/g, "");
      const decoded = raw === "" ? [] : raw.split("/").map(decodeSegment);
      if (decoded.some((segment) => segment === undefined || segment === "")) return { kind: "not-found" };
      const segments = decoded as string[];
      // Literals compare case-insensitively and decoded; a decoded slash stays inside its segment.
      const lookup = `/${segments.map(lookupSegment).join("/")}`;
      const [matches] = router.match(METHOD_NAME_ALL, lookup) as [[number, unknown][]];
      const candidates = [...new Set(matches.map(([i]) => i))]
        .map((i) => routes[i] as (typeof routes)[number])
        .filter((route) =>
          route.compiled.parameters.every(
            (p) => !p.int || segments[p.index] === undefined || inInt32(segments[p.index] as string),
          ),
        )
        .sort(rank);
      const wanted = method.toUpperCase();
      const allowed = new Set<string>();
      for (const candidate of candidates) {
        if (candidate.methods.size === 0 || candidate.methods.has(wanted)) {
          const params: Record<string, string> = {};
          for (const p of candidate.compiled.parameters) {
            const value = segments[p.index];
            if (value !== undefined) params[p.name] = value;
          }
          return { kind: "match", value: candidate.value, params };
        }
        for (const m of candidate.methods) allowed.add(m);
      }
      if (allowed.size === 0) return { kind: "not-found" };
      return { kind: "method-not-allowed", allowed: [...allowed].sort() };
    },
  };
}

function inInt32(value: string): boolean {
  if (!INT32.test(value)) return false;
  const n = Number(value);
  return n >= -(2 ** 31) && n <= 2 ** 31 - 1;
}
