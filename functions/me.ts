import { jsonResult } from "../shared/http/envelope.js";
import { appContext } from "./composition/app-context.js";
import { route } from "./composition/http-route.js";

route("me", { methods: ["GET"], route: "me" }, async (request, { requestId }) => {
  const caller = await appContext.validator.validate(request.headers.get("authorization"));
  return jsonResult(200, { caller }, requestId);
});
