/** A first `npm ci` of this lockfile on a laptop. */
export const FIRST_INSTALL_ESTIMATE: string;
/** How many packages the lockfile installs at the top of node_modules. */
export function lockedPackageCount(lockText: string): number;
/** How many packages are in place at the top of `nodeModules`. */
export function installedPackageCount(nodeModules: string): number;
/** The line printed before the install starts. */
export function startLine(what: string, total: number, estimate: string): string;
/** The line printed every 15 s while npm runs. */
export function progressLine(installed: number, total: number, seconds: number): string;
/** The lockfile of the project at `root`. */
export function readLock(root: string): string;
