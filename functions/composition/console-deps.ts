/**
 * The composition of the operator console over the app's one context. The settings and catalogs
 * are loaded and validated when this module loads (with the console routes, at app start), so a
 * bad catalog stops start-up naming its file and line; the console's parts are built on first use
 * from their own chunk (`console-parts.ts`), which keeps them out of the cold start.
 */

import { loadConsoleConfig } from "../../shared/console/console-config.js";
import { loadHealthMetricSet } from "../../shared/console/providers/health-metrics.js";
import { loadBrowserEvidencePolicies } from "../../shared/console/providers/browser-evidence-policies.js";
import { createLogger } from "../../shared/logging/logger.js";
import { isLocalProfile, loadNotifyConfig } from "../../shared/notify/notify-config.js";
import { actionModes } from "../../shared/ops/actions/action-settings.js";
import { catalogPath, loadActionTypes } from "../../shared/ops/actions/action-types.js";
import { shippedCatalogDir } from "../../shared/ops/catalog/catalog-dir.js";
import { loadRuleCatalog } from "../../shared/ops/rules/rule-catalog.js";
import { loadConfigurationBaseline } from "../../shared/ops/snapshots/configuration-baseline.js";
import type { ConsoleParts, ConsoleSettings } from "./console-parts-types.js";

const shippedDir = shippedCatalogDir(import.meta.dirname);
export const consoleConfig = loadConsoleConfig(process.env, shippedDir);
const catalogDir = consoleConfig.catalogDir ?? shippedDir;
export const actionTypes = loadActionTypes(catalogPath("action-types.json", catalogDir));
export const ruleCatalog = loadRuleCatalog(actionTypes, catalogPath("ops-rules.json", catalogDir));
/** The representative metrics of `query_subscription_health`, validated at start like the catalogs. */
export const healthMetricSet = loadHealthMetricSet(catalogPath("health-metrics.json", catalogDir));
/** The frozen configuration baseline; a citation whose digest does not match stops start-up like a bad catalog. */
export const configurationBaseline = loadConfigurationBaseline(catalogPath("configuration-baseline.json", catalogDir));
export const browserEvidencePolicies = loadBrowserEvidencePolicies(
  catalogPath("browser-evidence-policies.json", catalogDir),
);
/**
 * The notification channels' settings and `config/notifications-matrix.yaml`: a bad matrix line, a
 * half-configured channel or (outside the local stack) no A2 channel on `operational_alert` stops
 * start-up (spec §7 item 8, §8); locally the last is logged as `notification_route_unavailable`.
 */
export const notifyConfig = loadNotifyConfig(process.env, {
  local: isLocalProfile(process.env),
  catalogDir,
  log: (message, fields) => createLogger({ base: { service: "functions" } }).info(message, fields),
});
/** Each action type's mode (catalog default or `SVC_ACTION_MODES`); an override naming no action type stops start-up. */
export const actionModeOf = actionModes(actionTypes, consoleConfig.actions.modes);

/** What the console's parts are built from. */
const consoleSettings: ConsoleSettings = {
  config: consoleConfig,
  actionTypes,
  ruleCatalog,
  healthMetricSet,
  configurationBaseline,
  browserEvidencePolicies,
  actionModeOf,
  notifyConfig,
};

let parts: Promise<ConsoleParts> | undefined;

/** The console's parts, built once on first use. */
export function consoleParts(): Promise<ConsoleParts> {
  parts ??= import("./console-parts.js").then(
    (m) => m.buildConsoleParts(consoleSettings),
    (error: unknown) => {
      parts = undefined;
      throw error;
    },
  );
  return parts;
}
