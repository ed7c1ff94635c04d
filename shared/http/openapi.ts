import { z } from "zod";
import { REQUEST_ID_HEADER } from "./request-id.js";

/**
 * What the two HTTP APIs (the job API, the dashboard API) share to describe themselves in OpenAPI
 * 3.1: component schemas from the zod schemas that validate the traffic, the pieces operation
 * objects are written with, and {@link openApiDocument}, which checks and completes every operation
 * the same way (operationId, 401 on authenticated operations, `X-Request-Id` on every response, a
 * schema on every JSON response) so both documents pass `redocly lint` (recommended) as they are.
 */

export type Operation = Record<string, unknown> & { operationId?: string; responses?: Record<string, Response> };
type Response = { description: string; headers?: Record<string, unknown>; content?: Record<string, unknown> };

/**
 * A zod schema as JSON Schema 2020-12 (what OpenAPI 3.1 uses), as input: defaults make fields
 * optional, and objects do not forbid other properties (responses may gain fields additively).
 */
export function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  return z.toJSONSchema(schema, { target: "draft-2020-12", io: "input", unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
}

/** A JSON body referring to a component schema. */
export const jsonContent = (ref: string) => ({
  "application/json": { schema: { $ref: `#/components/schemas/${ref}` } },
});

/** A header declared once under `components.headers`. */
export const headerRef = (name: string) => ({ $ref: `#/components/headers/${name}` });

/** An error response in the `{detail, request_id}` envelope. */
export const errorResponse = (description: string, headers?: Record<string, unknown>) => ({
  description,
  ...(headers ? { headers } : {}),
  content: jsonContent("Error"),
});

/** 429/503 answers that suggest a wait. */
export const retryLater = (description: string) =>
  errorResponse(description, { "Retry-After": headerRef("RetryAfter") });

export const unauthorized = { "401": errorResponse("credentials missing or invalid") };
export const validationFailed = {
  "422": { description: "ValidationError: each failing field as loc, msg, type", content: jsonContent("Error") },
};
/**
 * For operations that refuse nothing themselves (liveness, readiness): the HTTP server in front of
 * every route still answers 4xx for a request it cannot take (header fields too large: 431; a
 * malformed request: 400) before any route runs.
 */
export const refusedBeforeRouting = {
  "4XX": { description: "the request was refused before the route ran (malformed, or header fields too large)" },
};

/** The headers both APIs use, declared once (`components.headers`). */
export const COMMON_HEADERS = {
  RequestId: {
    description:
      "The request's id (the caller's X-Request-Id when it is well-formed, else a new one); in every log line of the request",
    schema: { type: "string" },
  },
  ETag: { description: "The representation's version, for If-None-Match / If-Match", schema: { type: "string" } },
  RetryAfter: { description: "Seconds to wait before trying again", schema: { type: "integer", minimum: 0 } },
  IdempotentReplayed: {
    description: "`true` when the answer is the idempotency key's existing job, not a new one",
    schema: { type: "string", enum: ["true"] },
  },
  ContentDisposition: {
    description: "`attachment; filename=...`: the file's suggested name",
    schema: { type: "string" },
  },
} as const;

export interface DocumentOptions {
  title: string;
  version: string;
  description: string;
  servers: { url: string; description: string }[];
  securitySchemes: Record<string, unknown>;
  schemas: Record<string, Record<string, unknown>>;
  /** Path → method (lowercase) → operation. */
  paths: Record<string, Record<string, Operation>>;
  tags?: { name: string; description: string }[];
}

/**
 * An OpenAPI 3.1 document. Every operation must have an `operationId` and a schema on each JSON
 * response (a route without one is a programming error: this throws, so the tests fail). Each
 * authenticated operation (non-empty `security`) gets a 401 if it lists none; every response
 * declares `X-Request-Id`, which both transports stamp on every answer.
 */
export function openApiDocument(o: DocumentOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, Operation>> = {};
  const seen = new Set<string>();
  for (const [path, methods] of Object.entries(o.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const where = `${method.toUpperCase()} ${path}`;
      if (!operation.operationId) throw new Error(`${where}: no operationId`);
      if (seen.has(operation.operationId)) throw new Error(`${where}: operationId ${operation.operationId} repeats`);
      seen.add(operation.operationId);
      const security = operation.security as unknown[] | undefined;
      if (!security) throw new Error(`${where}: security not stated (use [] for a public operation)`);
      const responses: Record<string, Response> = { ...(operation.responses ?? {}) };
      if (security.length > 0 && !responses["401"]) Object.assign(responses, unauthorized);
      for (const [status, response] of Object.entries(responses)) {
        for (const [type, media] of Object.entries(response.content ?? {})) {
          if (type.includes("json") && !(media as { schema?: unknown }).schema)
            throw new Error(`${where} ${status}: JSON response without a schema`);
        }
        responses[status] = {
          ...response,
          headers: { [REQUEST_ID_HEADER]: headerRef("RequestId"), ...response.headers },
        };
      }
      paths[path] ??= {};
      (paths[path] as Record<string, Operation>)[method] = {
        ...operation,
        ...(Array.isArray(operation.parameters) ? { parameters: resolveParameters(operation.parameters) } : {}),
        responses: sortedResponses(responses),
      };
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: o.title,
      version: o.version,
      description: o.description,
      license: { name: "Proprietary", identifier: "LicenseRef-blastplane-proprietary" },
    },
    servers: o.servers,
    ...(o.tags ? { tags: o.tags } : {}),
    components: {
      securitySchemes: o.securitySchemes,
      // Only the headers some response uses (the linters flag unused components).
      headers: Object.fromEntries(
        Object.entries(COMMON_HEADERS).filter(([name]) =>
          JSON.stringify(paths).includes(`"#/components/headers/${name}"`),
        ),
      ),
      schemas: { ...o.schemas, Error: jsonSchemaOf(errorEnvelopeSchema) },
    },
    paths,
  };
}

/** Status codes in order (2xx before 4xx, `4XX` after the exact 4xx codes). */
function sortedResponses(responses: Record<string, Response>): Record<string, Response> {
  const rank = (code: string) => (code === "default" ? 1000 : Number(code.replace(/X/g, "9")));
  return Object.fromEntries(Object.entries(responses).sort(([a], [b]) => rank(a) - rank(b)));
}

/** The error envelope (spec: `detail`, `request_id`; 422 lists `loc`, `msg`, `type`). */
export const errorEnvelopeSchema = z.object({
  detail: z.union([
    z.string(),
    z.array(z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() })),
  ]),
  request_id: z.string(),
});

/**
 * Stands for the parameters of {@link parametersOf} until a document is built: converting zod
 * schemas to JSON Schema for every route cost the app's cold start more than any route used it
 * (decision 0016), so routes register the conversion and {@link openApiDocument} runs it.
 */
const DEFERRED_PARAMETERS = Symbol("deferred OpenAPI parameters");
type DeferredParameters = { [DEFERRED_PARAMETERS]: () => Record<string, unknown>[] };

function parametersNow(schema: z.ZodType, location: "path" | "query"): Record<string, unknown>[] {
  const json = jsonSchemaOf(schema) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: location,
      required: location === "path" || (json.required ?? []).includes(name),
      ...(description ? { description } : {}),
      schema: rest,
    };
  });
}

/**
 * The parameters a zod object validates (path or query), each with its JSON Schema: one stand-in
 * in the list, which {@link openApiDocument} (or {@link resolveParameters}) replaces by them.
 */
export function parametersOf(schema: z.ZodType, location: "path" | "query"): Record<string, unknown>[] {
  const deferred: DeferredParameters = { [DEFERRED_PARAMETERS]: () => parametersNow(schema, location) };
  return [deferred];
}

/** An operation's parameter list with each {@link parametersOf} stand-in replaced by its parameters. */
export function resolveParameters(parameters: readonly unknown[]): unknown[] {
  return parameters.flatMap((p) =>
    typeof p === "object" && p !== null && DEFERRED_PARAMETERS in p
      ? (p as DeferredParameters)[DEFERRED_PARAMETERS]()
      : [p],
  );
}

/** A JSON request body of a component schema. */
export const jsonBody = (ref: string) => ({ required: true, content: jsonContent(ref) });

/** A JSON request body with its schema inline (a schema only one route uses), converted when first read (see {@link parametersOf}). */
export const jsonBodyOf = (schema: z.ZodType) => {
  let inline: Record<string, unknown> | undefined;
  const media = {
    get schema() {
      if (!inline) {
        const { $schema: _, ...rest } = jsonSchemaOf(schema);
        inline = rest;
      }
      return inline;
    },
  };
  return { required: true, content: { "application/json": media } };
};

/** A JSON 200 response of a component schema. */
export const ok = (description: string, ref: string, headers?: Record<string, unknown>) => ({
  "200": { description, ...(headers ? { headers } : {}), content: jsonContent(ref) },
});
