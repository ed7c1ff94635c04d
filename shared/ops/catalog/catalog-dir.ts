import { existsSync } from "node:fs";
import path from "node:path";

/**
 * The folder of the catalogs shipped with the app, for when `SVC_CATALOG_DIR` is not set: `config/`
 * beside the bundle (the build copies the repository's `config/` into `dist/functions/config/`, so
 * the deployed package carries its catalogs whatever its working folder), then the one a folder up
 * (a chunk's), two folders up (the sources' `functions/composition/`), and last `config/` of the
 * working folder.
 */
export function shippedCatalogDir(moduleDir: string): string {
  const candidates = [moduleDir, path.dirname(moduleDir), path.dirname(path.dirname(moduleDir))].map((dir) =>
    path.join(dir, "config"),
  );
  return candidates.find((dir) => existsSync(path.join(dir, "ops-rules.json"))) ?? path.resolve("config");
}
