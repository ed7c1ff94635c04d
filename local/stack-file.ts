import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { writeFileDurablySync } from "../shared/storage/durable-file.js";
import { processAlive } from "../shared/process-alive.js";

/**
 * `stack.json` in the data folder tells the CLI (`blastplane token`, …) where the running local
 * stack listens, so it works with any data folder and with free ports.
 */
export interface StackFile {
  pid: number;
  started_at: string;
  functions_url: string;
  idp_url: string;
  jobapi_url: string;
  jobapi_data_dir: string;
  durable_rpc_url: string;
  blob_endpoint: string;
  table_endpoint: string;
  /** With BLASTPLANE_EXECUTOR=kubernetes: the local cluster's kubeconfig. */
  kubeconfig?: string;
  /** With the local Resource Manager (BLASTPLANE_LOCAL_ARM, on by default): its URL. */
  arm_url?: string;
  /** The Bot Service–shaped issuer of the Teams bot endpoint (and the bot's Entra stand-in): its HTTPS origin. */
  bot_service_url?: string;
}

export function stackFilePath(dataDir: string): string {
  return path.join(dataDir, "stack.json");
}

/** The stack already running on this data folder, if any (a stale file from a killed stack is ignored). */
export function readRunningStack(dataDir: string): StackFile | undefined {
  const file = stackFilePath(dataDir);
  if (!existsSync(file)) return undefined;
  try {
    const stack = JSON.parse(readFileSync(file, "utf8")) as StackFile;
    return processAlive(stack.pid) ? stack : undefined;
  } catch {
    return undefined;
  }
}

export function writeStackFile(dataDir: string, stack: StackFile): void {
  writeFileDurablySync(stackFilePath(dataDir), JSON.stringify(stack, null, 2), { mode: 0o600 });
}

export function removeStackFile(dataDir: string): void {
  rmSync(stackFilePath(dataDir), { force: true });
}
