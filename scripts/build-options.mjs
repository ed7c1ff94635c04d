// What the build bundles and how: shared by scripts/build.mjs, the bundle tests and the bench.
// Plain JavaScript so it runs before anything is compiled.
import { builtinModules } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// ESM bundles of CommonJS dependencies need a real `require`.
const banner = {
  js: [
    'import { createRequire as __bpCreateRequire } from "node:module";',
    "const require = __bpCreateRequire(import.meta.url);",
  ].join("\n"),
};
export const common = {
  bundle: true,
  platform: "node",
  target: "node20",
  format: "esm",
  sourcemap: "linked",
  banner,
  logLevel: "warning",
  absWorkingDir: root,
};

const builtins = new Set(builtinModules);

/**
 * Node built-ins imported by ES modules are loaded through `require` instead. An ES import of a
 * built-in makes Node read every export of it, and reading `node:http`'s loads its bundled
 * undici (~30 ms at start) that nothing here uses at that point.
 */
const builtinsThroughRequire = {
  name: "builtins-through-require",
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /^(node:)?[a-z0-9_/]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, "");
      if (args.kind !== "import-statement" || !builtins.has(name)) return undefined;
      return { path: name, namespace: "builtin-through-require" };
    });
    pluginBuild.onLoad({ filter: /.*/, namespace: "builtin-through-require" }, (args) => ({
      contents: `module.exports = require("node:${args.path}");`,
      loader: "js",
    }));
  },
};

/**
 * Makes `require(name)` from a package's files return a stand-in that loads the real module when it
 * is first used (a property read, a call). durable-functions requires axios (and through it undici,
 * form-data and mime-db), validator, OpenTelemetry and lodash's cloneDeep when it loads but uses
 * them only inside a durable client's calls, and moment only while an orchestration replays:
 * loading them with the app cost ~70 ms of every cold start. The real modules are bundled apart
 * (`dist/functions/lazy/<name>.cjs`, see {@link lazyBuildOptions}), so the app does not even parse
 * them until then.
 */
function lazyRequires(fromPackage, names) {
  const lazy = new Set(names);
  return {
    name: "lazy-requires",
    setup(pluginBuild) {
      pluginBuild.onResolve({ filter: /.*/ }, (args) => {
        if (args.namespace === "lazy-require") return { path: args.path, external: true };
        if (args.kind !== "require-call" || !lazy.has(args.path)) return undefined;
        if (!args.importer.includes(`${path.sep}node_modules${path.sep}${fromPackage}${path.sep}`)) return undefined;
        return { path: args.path, namespace: "lazy-require" };
      });
      pluginBuild.onLoad({ filter: /.*/, namespace: "lazy-require" }, (args) => ({
        loader: "js",
        contents: [
          "let loaded;",
          // The entry bundle's own require (its banner), so the path is relative to it; the build
          // checks that this stand-in is in the entry bundle.
          `const load = () => (loaded ??= __bpEntryRequire(${JSON.stringify(`./lazy/${lazyFileName(args.path)}`)}));`,
          // A function target, so a callable module (moment) can be called through it.
          "module.exports = new Proxy(function lazyModule() {}, {",
          "  get: (_, key) => load()[key],",
          "  has: (_, key) => key in load(),",
          "  apply: (_, self, args) => Reflect.apply(load(), self, args),",
          "  construct: (_, args) => Reflect.construct(load(), args),",
          "});",
        ].join("\n"),
      }));
    },
  };
}

/** Packages durable-functions requires at load but uses only later (see lazyRequires). */
export const LAZY_DURABLE_REQUIRES = ["axios", "validator", "moment", "@opentelemetry/api", "lodash/cloneDeep"];

/** `dist/functions/lazy/` file of a lazily required package. */
const lazyFileName = (name) => `${name.replace(/^@/, "").replaceAll("/", "-")}.cjs`;

/** The build of one package loaded on first use: `dist/functions/lazy/<name>.cjs`, as durable-functions resolves it. */
export function lazyBuildOptions(name) {
  return {
    ...common,
    banner: undefined,
    format: "cjs",
    minify: true,
    keepNames: true,
    stdin: {
      contents: `module.exports = require(${JSON.stringify(name)});`,
      resolveDir: path.join(root, "node_modules/durable-functions"),
      sourcefile: `lazy-${name}.js`,
    },
    outfile: `dist/functions/lazy/${lazyFileName(name)}`,
  };
}

/**
 * zod's namespace re-exports every locale (`z.locales`, ~60 languages, 260 kB minified) and a
 * bundler cannot drop what a namespace object reaches. Messages here are English (zod's default,
 * which zod imports on its own): `z.locales` keeps only `en`.
 */
const zodEnglishOnly = {
  name: "zod-english-only",
  setup(pluginBuild) {
    pluginBuild.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) => {
      if (!args.importer.includes(`${path.sep}node_modules${path.sep}zod${path.sep}`)) return undefined;
      return { path: path.join(args.resolveDir, "../locales/index.js"), namespace: "zod-english-only" };
    });
    pluginBuild.onLoad({ filter: /.*/, namespace: "zod-english-only" }, (args) => ({
      contents: 'export { default as en } from "./en.js";',
      resolveDir: path.dirname(args.path),
      loader: "js",
    }));
  },
};

/**
 * The Functions app, built for cold starts (each one on a consumption plan imports it): whitespace
 * and syntax minified but identifiers not renamed, so classes keep their names (`DomainError`
 * takes its `name` from its class) without `keepNames`, whose ~1,600 `__name()` calls cost ~20 ms
 * of every import; SDKs that only some routes need (Key Vault, identity, Blob) split into chunks
 * loaded on first use; linked source maps map every chunk back to the sources
 * (`--enable-source-maps`). `dist/meta/functions.json` is esbuild's account of what it holds.
 */
export const functionsBuildOptions = {
  ...common,
  entryPoints: ["functions/index.ts"],
  outdir: "dist/functions",
  entryNames: "[name]",
  banner: { js: `${banner.js}\nconst __bpEntryRequire = require;` },
  chunkNames: "chunks/[name]-[hash]",
  splitting: true,
  minifyWhitespace: true,
  minifySyntax: true,
  metafile: true,
  // Supplied by the Functions worker (or the local host) at run time; playwright-core reads its own
  // package files at run time and does not survive bundling, so it loads from node_modules (it is
  // a runtime dependency, used only where SVC_BROWSER_EVIDENCE_CHROMIUM names a Chromium).
  external: ["@azure/functions-core", "playwright-core"],
  plugins: [builtinsThroughRequire, zodEnglishOnly, lazyRequires("durable-functions", LAZY_DURABLE_REQUIRES)],
};
