import { type ChildProcess, spawn } from "node:child_process";
import type { Logger } from "../shared/logging/logger.js";
import { stopChild } from "./stop-child.js";

export interface RunningChild {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a Node service of the stack (the job API) as a child process that ends with this one
 * (watchdog preload), forwards its JSON log lines, and waits for the line announcing its URL.
 */
export async function startChildService(options: {
  name: string;
  script: string;
  env: Record<string, string>;
  watchdogPath: string;
  readyMessage: string;
  logger: Logger;
  timeoutMs?: number;
}): Promise<RunningChild> {
  const child = spawn(process.execPath, ["--require", options.watchdogPath, options.script], {
    env: { ...process.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let url: string | undefined;
  let pending = "";
  let tail = "";
  const ready = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${options.name} did not start in time:\n${tail}`)),
      options.timeoutMs ?? 30_000,
    );
    child.stdout?.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      pending += chunk.toString();
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) {
        if (!url && line.includes(options.readyMessage)) {
          try {
            url = String((JSON.parse(line) as { url?: string }).url);
            clearTimeout(timer);
            resolve(url);
          } catch {
            // not a JSON line
          }
        }
      }
    });
    child.stderr?.on("data", (chunk: Buffer) => {
      process.stderr.write(chunk);
      tail = (tail + chunk.toString()).slice(-4000);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${options.name} exited with code ${String(code)}:\n${tail}`));
    });
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  const resolvedUrl = await ready;
  child.once("exit", (code, signal) => options.logger.info(`${options.name} stopped`, { code, signal }));
  return {
    url: resolvedUrl,
    process: child,
    stop: () => stopChild(child, exited, 15_000),
  };
}
