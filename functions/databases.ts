import { errorResponse, ok, parametersOf, retryLater, validationFailed } from "../shared/http/openapi.js";
import { z } from "zod";
import { DATABASE_NAME } from "../shared/blast/database-builder.js";
import type { OperationView } from "../shared/orchestrations/operations.js";
import { jsonResult } from "../shared/http/envelope.js";
import { ValidationError } from "../shared/errors.js";
import { bodyChunks } from "../shared/http/read-body.js";
import { parsePath, zodIssues } from "../shared/http/validation.js";
import { databaseService } from "./composition/dashboard-deps.js";
import { callerOf, type RouteScope, route } from "./composition/http-route.js";

const namePath = z.object({ name: z.string().regex(DATABASE_NAME, "malformed database name") });
const nameRefused = {
  "400": errorResponse("malformed database name"),
  "404": errorResponse("unknown database"),
  "503": retryLater("no database store is configured"),
};

route(
  "databasesList",
  {
    methods: ["GET"],
    route: "databases",
    role: "Reader",
    openapi: {
      summary: "Prepared databases with their warm-up and update state",
      responses: { ...ok("databases", "DatabaseList"), "503": retryLater("no database store is configured") },
    },
  },
  async (_request, scope) => {
    const databases = await databaseService(scope).list();
    return jsonResult(200, { databases, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

/** An operation the route started (200 on start, per spec §1 item 3). */
function startedResult(operation: OperationView, scope: RouteScope) {
  return jsonResult(
    200,
    { operation, operation_status_url: operation.links.self, meta: { request_id: scope.requestId } },
    scope.requestId,
  );
}

route(
  "databasesPrepare",
  {
    methods: ["POST"],
    route: "databases/{name}/prepare",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Prepare (download and format) a database's latest release, as an operation",
      parameters: parametersOf(namePath, "path"),
      responses: { ...ok("the operation started", "OperationStarted"), ...nameRefused },
    },
  },
  async (request, scope) => {
    const { name } = parsePath(request, namePath);
    return startedResult(
      await databaseService(scope).prepare(callerOf(scope), name, { requestId: scope.requestId }),
      scope,
    );
  },
);

route(
  "databasesWarmup",
  {
    methods: ["POST"],
    route: "databases/{name}/warmup",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Warm a database's current release into the nodes' caches, as an operation",
      parameters: parametersOf(namePath, "path"),
      responses: { ...ok("the operation started", "OperationStarted"), ...nameRefused },
    },
  },
  async (request, scope) => {
    const { name } = parsePath(request, namePath);
    return startedResult(
      await databaseService(scope).warmUp(callerOf(scope), name, { requestId: scope.requestId }),
      scope,
    );
  },
);

route(
  "databasesAdding",
  {
    methods: ["GET"],
    route: "databases/adding",
    role: "Reader",
    openapi: {
      summary: "What adding a database needs: whether Prepare is configured, the upload limit, the nodes' memory",
      responses: { ...ok("what adding a database needs", "DatabaseAdding") },
    },
  },
  async (_request, scope) => {
    const adding = await databaseService(scope).addingOptions();
    return jsonResult(200, { ...adding, meta: { request_id: scope.requestId } }, scope.requestId);
  },
);

/** The upload's fields, in the query (the body is the FASTA itself); every refusal is a 422 naming its field. */
const uploadQuery = z.object({
  name: z
    .string({ error: "give the database a name" })
    .regex(
      DATABASE_NAME,
      "a database name has 1 to 64 letters, digits, '.', '_' or '-' and starts with a letter or digit (no '/', '\\' or spaces)",
    ),
  type: z.enum(["nucl", "prot"], { error: "type must be nucl (nucleotide) or prot (protein)" }),
  partitions: z.coerce
    .number({ error: "partitions must be a whole number from 0 to 64" })
    .int({ error: "partitions must be a whole number from 0 to 64" })
    .min(0, { error: "partitions must be a whole number from 0 to 64" })
    .max(64, { error: "partitions must be a whole number from 0 to 64" })
    .default(0)
    .describe("0: not partitioned; 2–64: partitions for the sharded profile (1 counts as 0)"),
});

route(
  "databasesUpload",
  {
    methods: ["POST"],
    route: "databases/uploads",
    role: "Contributor",
    durable: true,
    openapi: {
      summary: "Add a database from a FASTA file: the body streams to storage, then the build runs as an operation",
      description:
        "The body is the FASTA text itself (any content type; not multipart). It is checked while it streams to the platform storage account, never held whole: binary or compressed data, text before the first header, empty ids, letters outside the chosen molecule's alphabet and records without letters are refused with 422 (loc body), a body over DATABASE_UPLOAD_MAX_BYTES with 413; nothing is stored or registered then. No storage URL is issued.",
      parameters: parametersOf(uploadQuery, "query"),
      requestBody: {
        required: true,
        content: { "text/plain": { schema: { type: "string", description: "FASTA text" } } },
      },
      responses: {
        ...ok("the upload is stored and its build started", "DatabaseUploadStarted"),
        "409": errorResponse("a database of that name exists already, or another upload of that name is in progress"),
        "413": errorResponse("the FASTA file is larger than DATABASE_UPLOAD_MAX_BYTES"),
        ...validationFailed,
        "503": retryLater("no database store or upload store is configured"),
      },
    },
  },
  async (request, scope) => {
    const raw: Record<string, string> = {};
    for (const [k, v] of request.query) if (!(k in raw)) raw[k] = v;
    const parsed = uploadQuery.safeParse(raw);
    if (!parsed.success) throw new ValidationError(zodIssues(parsed.error, "query", raw));
    const declared = request.headers.get("content-length");
    const started = await databaseService(scope).upload(
      callerOf(scope),
      { ...parsed.data, partitions: parsed.data.partitions >= 2 ? parsed.data.partitions : 0 },
      bodyChunks(request.body),
      { requestId: scope.requestId, declaredBytes: declared === null ? undefined : Number(declared) },
    );
    return jsonResult(
      200,
      {
        operation: started.operation,
        operation_status_url: started.operation.links.self,
        upload: started.upload,
        meta: { request_id: scope.requestId },
      },
      scope.requestId,
    );
  },
);
