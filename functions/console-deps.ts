/**
 * The composition of the operator console over the app's one context. The settings and catalogs
 * are loaded and validated when this module loads (with the console routes, at app start), so a
 * bad catalog stops start-up naming its file and line; the console's parts are built on first use
 * from their own chunk (`console-parts.ts`), which keeps them out of the cold start.
 */

import { loadConsoleConfig } from "../shared/console/console-config.js";
import { catalogPath, loadActionTypes } from "../shared/ops/actions/action-types.js";
import { shippedCatalogDir } from "../shared/ops/catalog/catalog-dir.js";
import { loadRuleCatalog } from "../shared/ops/rules/rule-catalog.js";
import type { ConsoleParts } from "./console-parts.js";

export const consoleConfig = loadConsoleConfig(process.env);
const catalogDir = consoleConfig.catalogDir ?? shippedCatalogDir(import.meta.dirname);
export const actionTypes = loadActionTypes(catalogPath("action-types.json", catalogDir));
export const ruleCatalog = loadRuleCatalog(actionTypes, catalogPath("ops-rules.json", catalogDir));

let parts: Promise<ConsoleParts> | undefined;

/** The console's parts, built once on first use. */
export function consoleParts(): Promise<ConsoleParts> {
  parts ??= import("./console-parts.js").then(
    (m) => m.buildConsoleParts(),
    (error: unknown) => {
      parts = undefined;
      throw error;
    },
  );
  return parts;
}
