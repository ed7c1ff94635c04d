import { ok, refusedBeforeRouting, retryLater } from "../shared/http/openapi.js";
import { jsonResult } from "../shared/http/envelope.js";
import { readinessCheck } from "./composition/dashboard-deps.js";
import { route } from "./composition/http-route.js";

route(
  "health",
  {
    methods: ["GET"],
    route: "health",
    openapi: { summary: "Liveness (public)", responses: { ...ok("alive", "Health"), ...refusedBeforeRouting } },
  },
  async (_request, { requestId }) => jsonResult(200, { status: "ok", service: "blastplane-functions" }, requestId),
);

route(
  "healthReady",
  {
    methods: ["GET"],
    route: "health/ready",
    durable: true,
    openapi: {
      summary: "Readiness: storage, the task hub, the job API (public)",
      responses: {
        ...ok("ready", "Readiness"),
        ...refusedBeforeRouting,
        "503": retryLater("a dependency did not answer in time (each is named)"),
      },
    },
  },
  async (_request, scope) => jsonResult(200, await readinessCheck(scope).check(), scope.requestId),
);
