import { jsonResult } from "../shared/http/envelope.js";
import { readinessCheck } from "./composition/dashboard-deps.js";
import { route } from "./composition/http-route.js";

route("health", { methods: ["GET"], route: "health" }, async (_request, { requestId }) =>
  jsonResult(200, { status: "ok", service: "blastplane-functions" }, requestId),
);

route("healthReady", { methods: ["GET"], route: "health/ready", durable: true }, async (_request, scope) =>
  jsonResult(200, await readinessCheck(scope).check(), scope.requestId),
);
