// Imports one module in this fresh process the way the Azure Functions worker loads an app: with
// an `@azure/functions-core` present, so `@azure/functions` registers functions instead of dropping
// to test mode. Prints one JSON line: how long the import took (wall and CPU ms); with --functions,
// what the app registered; with --loaded, the files the import loaded (CommonJS and ES modules,
// the latter through a module hook, which this probe registers only then). Used by
// `npm run bench` (metric d) and by tests. Plain JavaScript with no dependencies.
//
//   node scripts/import-probe.mjs [--functions] [--loaded] <module specifier or file>
import Module from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const listFunctions = args.includes("--functions");
const listLoaded = args.includes("--loaded");
const target = args.find((arg) => !arg.startsWith("--"));
if (!target) {
  process.stderr.write("usage: node scripts/import-probe.mjs [--functions] [--loaded] <module>\n");
  process.exit(2);
}

// The worker's core module, as much of it as the library calls while an app registers.
const functions = [];
const disposable = { dispose() {} };
const core = {
  version: "4.0.0-probe",
  hostVersion: "4.1000.0",
  Disposable: class {
    static from() {
      return disposable;
    }
    dispose() {}
  },
  registerFunction: (metadata) => {
    functions.push(metadata);
    return disposable;
  },
  setProgrammingModel: () => {},
  getProgrammingModel: () => undefined,
  registerHook: () => disposable,
  log: () => {},
};
const originalLoad = Module._load;
Module._load = function load(request, parent, isMain) {
  return request === "@azure/functions-core" ? core : originalLoad.call(this, request, parent, isMain);
};

// The ES modules the import loads (the bundle's chunks): a synchronous module hook (Node 22.15+),
// registered only for --loaded so that the timings above run without it.
const esModules = [];
if (listLoaded && typeof Module.registerHooks === "function") {
  Module.registerHooks({
    load(url, context, nextLoad) {
      if (url.startsWith("file:")) esModules.push(fileURLToPath(url));
      return nextLoad(url, context);
    },
  });
}

const specifier = target.startsWith(".") || path.isAbsolute(target) ? pathToFileURL(path.resolve(target)).href : target;
// Standard output carries exactly one JSON line (this probe's); whatever the app writes while it
// loads (its start-up log lines) goes to standard error.
const writeStdout = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);
const cpuBefore = process.cpuUsage();
const started = performance.now();
await import(specifier);
const importMs = performance.now() - started;
const cpu = process.cpuUsage(cpuBefore);
const result = { import_ms: importMs, cpu_ms: (cpu.user + cpu.system) / 1000, registered: functions.length };
if (listFunctions) result.functions = functions.map(({ name, bindings }) => ({ name, bindings }));
if (listLoaded) result.loaded = [...new Set([...Object.keys(Module._cache), ...esModules])];
writeStdout(`${JSON.stringify(result)}\n`);
