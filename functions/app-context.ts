import { TableServiceClient } from "@azure/data-tables";
import { apiAudience, createJwtValidator, entraDiscoveryUrl } from "../shared/auth/jwt-validator.js";
import { type AppConfig, loadConfig } from "../shared/config/load-config.js";
import { createLogger, type Logger } from "../shared/logging/logger.js";
import { createFixedWindowLimiter } from "../shared/ops/rate-limiter.js";

/**
 * The app's dependencies, built once from the one validated configuration when the app loads, so
 * a bad setting stops start-up instead of failing the first request.
 */
export interface AppContext {
  config: AppConfig;
  logger: Logger;
  validator: ReturnType<typeof createJwtValidator>;
  tableService: TableServiceClient;
  noopLimiter: ReturnType<typeof createFixedWindowLimiter>;
}

function build(): AppContext {
  const config = loadConfig(process.env);
  const logger = createLogger({ level: config.logLevel, base: { service: "functions" } });
  return {
    config,
    logger,
    validator: createJwtValidator({
      discoveryUrl: config.auth.discoveryUrl ?? entraDiscoveryUrl(config.auth.tenantId),
      audience: [config.auth.clientId, apiAudience(config.auth.clientId)],
      clockToleranceSeconds: config.auth.clockSkewSeconds,
    }),
    tableService: TableServiceClient.fromConnectionString(config.storageConnectionString, { allowInsecureConnection: true }),
    noopLimiter: createFixedWindowLimiter(config.noopRateLimitPerMinute, 60_000),
  };
}

export const appContext: AppContext = build();
