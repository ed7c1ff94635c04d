import { existsSync } from "node:fs";
import os from "node:os";
import { z } from "zod";
import { type Env, envEnum, envPort, LOG_LEVELS, type LogLevel, parseEnv } from "../../shared/config/env.js";
import { TERMINAL_DAEMON_DEFAULT_PORT } from "./terminal-protocol.js";

/** The terminal daemon's settings (its own container of the job-API pod, decision 0020). */
export interface TerminalDaemonConfig {
  readonly port: number;
  readonly shell: string;
  /** The shell's environment: a fixed allow-list, never the daemon's whole environment. */
  readonly shellEnv: Readonly<Record<string, string>>;
  readonly cwd: string;
  readonly logLevel: LogLevel;
}

/** Variables the shell inherits from the daemon (nothing else: no storage or identity settings). */
const PASSED_TO_SHELL = ["PATH", "HOME", "LANG", "LC_ALL", "KUBECONFIG", "USER", "LOGNAME"] as const;

export const terminalDaemonSettingsSchema = z.object({
  JOBAPI_TERMINAL_DAEMON_PORT: envPort().default(TERMINAL_DAEMON_DEFAULT_PORT),
  JOBAPI_TERMINAL_SHELL: z.string().startsWith("/", "must be an absolute path").optional(),
  LOG_LEVEL: envEnum(LOG_LEVELS).default("info"),
});

/** The daemon's one validated configuration. */
export function loadTerminalDaemonConfig(env: Env): TerminalDaemonConfig {
  return parseEnv(terminalDaemonSettingsSchema, env, (c) => {
    const shellEnv: Record<string, string> = { TERM: "xterm-256color" };
    for (const name of PASSED_TO_SHELL) {
      const value = env[name];
      if (value !== undefined) shellEnv[name] = value;
    }
    shellEnv.HOME ??= os.homedir();
    return {
      port: c.JOBAPI_TERMINAL_DAEMON_PORT,
      shell: c.JOBAPI_TERMINAL_SHELL ?? (existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh"),
      shellEnv,
      cwd: shellEnv.HOME,
      logLevel: c.LOG_LEVEL,
    };
  });
}
