// Bundles one TypeScript entry of the repository with esbuild (packages stay external) into
// node_modules/.cache/blastplane/ and imports it, so a docs script runs the sources without a build.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export async function bundleAndImport(entry) {
  const outfile = path.join(root, "node_modules/.cache/blastplane", `${path.basename(entry, ".ts")}.mjs`);
  mkdirSync(path.dirname(outfile), { recursive: true });
  await build({
    entryPoints: [path.join(root, entry)],
    outfile,
    bundle: true,
    platform: "node",
    format: "esm",
    packages: "external",
    logLevel: "error",
  });
  return import(pathToFileURL(outfile).href);
}
