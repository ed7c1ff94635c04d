// `npm run docs:openapi`: rewrites the committed API descriptions (test/fixtures/dashboard-openapi.json,
// test/fixtures/jobapi-openapi.json) from the route definitions, after a route was added or changed.
// The tests hold the committed copies equal to what the APIs serve; this only saves writing them by hand.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { bundleAndImport, root } from "./bundle-import.mjs";

const { buildDescriptions } = await bundleAndImport("scripts/openapi-fixtures.ts");
// The job API test describes its routes with this body limit (test/unit/jobapi-http.test.ts).
const descriptions = await buildDescriptions(Number(process.argv[2] ?? 1024));
for (const [file, document] of Object.entries(descriptions)) {
  writeFileSync(path.join(root, "test/fixtures", file), `${JSON.stringify(document, null, 2)}\n`);
  console.log(`test/fixtures/${file} written`);
}
process.exit(0);
