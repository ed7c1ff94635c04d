import { bearer } from "../shared/dashboard/openapi.js";
import { ok } from "../shared/http/openapi.js";
import { jsonResult } from "../shared/http/envelope.js";
import { appContext } from "./composition/app-context.js";
import { route } from "./composition/http-route.js";

route(
  "me",
  {
    methods: ["GET"],
    route: "me",
    openapi: {
      summary: "The signed-in caller and their roles",
      security: bearer,
      responses: ok("the caller", "Caller"),
    },
  },
  async (request, { requestId }) => {
    const { oid, name, tenant_id, roles } = await appContext.validator.validate(request.headers.get("authorization"));
    return jsonResult(200, { caller: { oid, name, tenant_id, roles } }, requestId);
  },
);
