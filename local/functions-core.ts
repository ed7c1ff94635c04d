import { createRequire } from "node:module";
import Module from "node:module";

/**
 * Stand-in for the Azure Functions worker's `@azure/functions-core` module. The real worker
 * resolves this module name before the app loads; `@azure/functions` then hands it every
 * registration and its programming model. Installing this before the app is imported lets the
 * library run in "worker mode" instead of dropping registrations in test mode.
 */

/** One binding as `@azure/functions` describes it (`toCoreFunctionMetadata`). */
export interface CoreBinding {
  type: string;
  direction?: "in" | "out" | "inout";
  name?: string;
  route?: string;
  methods?: string[];
  authLevel?: string;
  schedule?: string;
  runOnStartup?: boolean;
  useMonitor?: boolean;
  [key: string]: unknown;
}

export interface CoreFunctionMetadata {
  name: string;
  bindings: Record<string, CoreBinding>;
  retryOptions?: unknown;
}

export type CoreCallback = (...args: unknown[]) => unknown;

/** The parts of the library's invocation model the host drives. */
export interface CoreInvocationModel {
  getArguments(): Promise<{ context: InvocationContextLike; inputs: unknown[] }>;
  invokeFunction(context: InvocationContextLike, inputs: unknown[], callback: CoreCallback): Promise<unknown>;
  getResponse(
    context: InvocationContextLike,
    result: unknown,
  ): Promise<{ returnValue?: unknown; outputData?: unknown[] }>;
}

export interface InvocationContextLike {
  invocationId: string;
  functionName: string;
  [key: string]: unknown;
}

export interface CoreProgrammingModel {
  name: string;
  version: string;
  getInvocationModel(coreContext: unknown): CoreInvocationModel;
  getCapabilities(capabilities: Record<string, string>): Promise<Record<string, string>>;
}

export interface RegisteredFunction {
  metadata: CoreFunctionMetadata;
  callback: CoreCallback;
}

type HookCallback = (context: Record<string, unknown>) => unknown;

class Disposable {
  static from(...items: { dispose(): void }[]): Disposable {
    return new Disposable(() => {
      for (const item of items) item.dispose();
    });
  }
  constructor(private onDispose: (() => void) | undefined) {}
  dispose(): void {
    this.onDispose?.();
    this.onDispose = undefined;
  }
}

/** The registry the stand-in fills; the local host reads it after the app is imported. */
export class FunctionsCoreRegistry {
  readonly functions = new Map<string, RegisteredFunction>();
  readonly hooks = new Map<string, HookCallback[]>();
  programmingModel: CoreProgrammingModel | undefined;

  constructor(private readonly logSink: (level: string, category: string, message: string) => void) {}

  /** The object `require("@azure/functions-core")` returns. */
  createModule(): Record<string, unknown> {
    return {
      version: "4.0.0-blastplane-local",
      hostVersion: "4.1000.0",
      Disposable,
      registerFunction: (metadata: CoreFunctionMetadata, callback: CoreCallback) => {
        if (this.functions.has(metadata.name)) {
          throw new Error(`a function named "${metadata.name}" is already registered`);
        }
        this.functions.set(metadata.name, { metadata, callback });
        return new Disposable(() => this.functions.delete(metadata.name));
      },
      setProgrammingModel: (model: CoreProgrammingModel) => {
        this.programmingModel = model;
      },
      getProgrammingModel: () => this.programmingModel,
      registerHook: (hookName: string, callback: HookCallback) => {
        const list = this.hooks.get(hookName) ?? [];
        list.push(callback);
        this.hooks.set(hookName, list);
        return new Disposable(() => {
          const current = this.hooks.get(hookName) ?? [];
          this.hooks.set(
            hookName,
            current.filter((c) => c !== callback),
          );
        });
      },
      log: (level: string, category: string, message: string) => this.logSink(level, category, message),
    };
  }

  async runHooks(hookName: string, context: Record<string, unknown>): Promise<void> {
    for (const hook of this.hooks.get(hookName) ?? []) await hook(context);
  }
}

const CORE_MODULE_NAME = "@azure/functions-core";
let installed: FunctionsCoreRegistry | undefined;

type ModuleLoad = (request: string, parent: unknown, isMain: boolean) => unknown;

/**
 * Makes `require("@azure/functions-core")` resolve to the registry's module, for every later
 * require in this process (CJS, and ESM bundles through their createRequire banner). One registry
 * per process, as one worker hosts one app.
 */
export function installFunctionsCore(registry: FunctionsCoreRegistry): void {
  if (installed) throw new Error("@azure/functions-core is already installed in this process");
  installed = registry;
  const moduleExports = registry.createModule();
  const mod = Module as unknown as { _load: ModuleLoad };
  const originalLoad = mod._load;
  mod._load = function load(request: string, parent: unknown, isMain: boolean) {
    if (request === CORE_MODULE_NAME) return moduleExports;
    return originalLoad.call(this, request, parent, isMain);
  };
  // The library may already have been loaded (and cached its failed lookup) by an earlier import.
  const require = createRequire(import.meta.url);
  try {
    const resolved = require.resolve("@azure/functions");
    if (require.cache[resolved]) {
      throw new Error("@azure/functions was loaded before the local host installed @azure/functions-core");
    }
  } catch (error) {
    if (error instanceof Error && error.message.includes("loaded before")) throw error;
  }
}
