// `npm run docs:config`: regenerates the configuration reference in docs/configuration.md from the
// settings schemas (scripts/config-reference.ts, bundled here with esbuild so it runs without a
// build). `--check` changes nothing and exits 1 when the committed reference is out of date.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { bundleAndImport, root } from "./bundle-import.mjs";

const reference = await bundleAndImport("scripts/config-reference.ts");
const docFile = path.join(root, reference.DOC_PATH);
const doc = readFileSync(docFile, "utf8");
const { block, names, undescribed } = reference.generateReference(root);
const updated = reference.withReference(doc, block);
if (undescribed.length > 0)
  console.warn(`No meaning yet in ${reference.DESCRIPTIONS_PATH} for: ${undescribed.join(", ")}`);
if (process.argv.includes("--check")) {
  if (updated !== doc) {
    console.error(`${reference.DOC_PATH} is out of date: run npm run docs:config`);
    process.exitCode = 1;
  } else console.log(`${reference.DOC_PATH}: ${names.length} settings, up to date`);
} else {
  writeFileSync(docFile, updated);
  console.log(`${reference.DOC_PATH}: ${names.length} settings${updated === doc ? " (unchanged)" : " written"}`);
}
