import { jsonResult } from "../shared/http/envelope.js";
import { DependencyUnavailableError } from "../shared/errors.js";
import { appContext } from "./app-context.js";
import { route } from "./http-route.js";

/** Runs a dependency check with a deadline; resolves to an error text or undefined. */
async function check(run: () => Promise<unknown>, timeoutMs: number): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      run(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    clearTimeout(timer);
  }
}

route("health", { methods: ["GET"], route: "health" }, async (_req, { requestId }) =>
  jsonResult(200, { status: "ok", service: "blastplane-functions" }, requestId),
);

route("healthReady", { methods: ["GET"], route: "health/ready", durable: true }, async (_req, { requestId, logger, durable }) => {
  const timeoutMs = appContext.config.healthDependencyTimeoutMs;
  const [storage, durableBackend] = await Promise.all([
    check(() => appContext.tableService.getProperties(), timeoutMs),
    check(() => durable().getStatusBy({ runtimeStatus: [] }), timeoutMs),
  ]);
  const failing = [storage ? "storage" : undefined, durableBackend ? "durable backend" : undefined].filter(Boolean);
  if (failing.length > 0) {
    logger.warn("not ready", { storage, durable_backend: durableBackend });
    throw new DependencyUnavailableError(`not ready: ${failing.join(" and ")} unreachable`, 5);
  }
  return jsonResult(200, { status: "ready", checks: { storage: "ok", durable_backend: "ok" } }, requestId);
});
