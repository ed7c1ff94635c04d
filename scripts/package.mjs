// `npm run package`: the Functions app's deployment package, as azd (service `api`) and a zip deploy
// take it. dist/package/ holds exactly what the app needs at run time — the bundle with its lazy
// chunks and the config/ catalogs it refuses to start without, host.json, a package.json naming the
// entry point, and node_modules with only the modules the bundle leaves external — and
// dist/blastplane-api.zip is the same folder zipped. test/integration/functions-package.test.ts
// starts the app from the unzipped folder alone.
// Plain JavaScript; run after scripts/build.mjs.
import {
  cpSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import yazl from "yazl";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = path.join(root, "dist/package");
const zipPath = path.join(root, "dist/blastplane-api.zip");
const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
// What the bundle loads from node_modules at run time: its externals that the Functions worker does
// not supply (@azure/functions-core it does), and packages whose files it reads (the Swagger UI of
// /api/docs, resolved with require.resolve).
const SHIPPED_EXTERNALS = ["playwright-core", "swagger-ui-dist"];

if (!existsSync(path.join(root, "dist/functions/index.js"))) {
  console.error("dist/functions/index.js is missing: run npm run build first");
  process.exit(1);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
cpSync(path.join(root, "dist/functions"), path.join(out, "dist/functions"), { recursive: true });
cpSync(path.join(root, "host.json"), path.join(out, "host.json"));
const dependencies = {};
for (const name of SHIPPED_EXTERNALS) {
  const version = manifest.dependencies?.[name];
  if (!version) throw new Error(`${name} is external to the bundle but not a dependency in package.json`);
  dependencies[name] = version;
  cpSync(path.join(root, "node_modules", name), path.join(out, "node_modules", name), { recursive: true });
}
writeFileSync(
  path.join(out, "package.json"),
  `${JSON.stringify(
    {
      name: manifest.name,
      version: manifest.version,
      private: true,
      type: "module",
      main: manifest.main,
      dependencies,
    },
    null,
    2,
  )}\n`,
);

/** Every file under `dir`, as paths relative to `base`, in a stable order. */
function files(dir, base = dir) {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const full = path.join(dir, name);
      return statSync(full).isDirectory() ? files(full, base) : [path.relative(base, full)];
    });
}

const zip = new yazl.ZipFile();
const entries = files(out);
for (const file of entries) zip.addFile(path.join(out, file), file.split(path.sep).join("/"));
zip.end();
await new Promise((resolve, reject) => {
  zip.outputStream.pipe(createWriteStream(zipPath)).on("close", resolve).on("error", reject);
});
console.log(`dist/package: ${entries.length} files; ${path.relative(root, zipPath)}: ${statSync(zipPath).size} bytes`);
