// Types of build-options.mjs (plain JavaScript so it runs before anything is compiled), for the tests that build with it.
import type { BuildOptions } from "esbuild";

export declare const root: string;
export declare const common: BuildOptions;
export declare const functionsBuildOptions: BuildOptions;
export declare const LAZY_DURABLE_REQUIRES: string[];
export declare function lazyBuildOptions(name: string): BuildOptions;
