import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";

/** The NCBI BLAST+ executables blastplane may start. Anything else is refused. */
export type BlastTool =
  | "blastn"
  | "blastp"
  | "blastx"
  | "tblastn"
  | "tblastx"
  | "makeblastdb"
  | "blastdbcmd"
  | "blastdb_aliastool";

const TOOLS: ReadonlySet<string> = new Set<BlastTool>([
  "blastn",
  "blastp",
  "blastx",
  "tblastn",
  "tblastx",
  "makeblastdb",
  "blastdbcmd",
  "blastdb_aliastool",
]);

/** Tail of stderr kept for error reports; BLAST can be chatty (one warning per query). */
const STDERR_TAIL_BYTES = 64 * 1024;
/** Stdout is for small reports (`-info`, `-version`); bulk results must go to `-out` files. */
const STDOUT_LIMIT_BYTES = 16 * 1024 * 1024;
/** Time a process gets to exit after SIGTERM before it is SIGKILLed. */
const KILL_GRACE_MS = 5_000;

/**
 * util-linux `setpriv`, when this machine has it (Linux): a tool started through
 * `setpriv --pdeathsig KILL` is killed by the kernel the moment the process that started it dies,
 * even by SIGKILL, so a restarted job API never races a leftover BLAST writing the same files.
 */
const SETPRIV = findExecutable("setpriv");

/** Absolute path of `name` on PATH (executable), or undefined. */
function findExecutable(name: string): string | undefined {
  if (process.platform !== "linux") return undefined;
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Options for {@link runBlastTool}. */
export interface RunBlastToolOptions {
  /** Working directory of the process; relative paths in `args` resolve against it. */
  cwd?: string;
  /** Aborting kills the process (SIGTERM, then SIGKILL after a grace period). */
  signal?: AbortSignal;
  /** Called once the process has started, with its pid (for tracking or external cancellation). */
  onSpawn?: (pid: number) => void;
}

/** A BLAST+ tool could not be started, exited non-zero, died from a signal or overflowed stdout. */
export class BlastToolError extends Error {
  /** The tool that failed. */
  readonly tool: BlastTool;
  /** Exit code, or null when the process did not exit normally (not started, or killed by a signal). */
  readonly exitCode: number | null;
  /** Signal that ended the process, if any. */
  readonly signal: NodeJS.Signals | null;
  /** The last 64 KiB of the tool's stderr. */
  readonly stderr: string;

  constructor(
    message: string,
    tool: BlastTool,
    exitCode: number | null,
    signal: NodeJS.Signals | null,
    stderr: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "BlastToolError";
    this.tool = tool;
    this.exitCode = exitCode;
    this.signal = signal;
    this.stderr = stderr;
  }
}

function abortError(tool: BlastTool, reason: unknown): Error {
  const error = new Error(`${tool} was aborted`, { cause: reason });
  error.name = "AbortError";
  return error;
}

/** Keeps the last `limit` bytes of a byte stream without holding more than about twice that. */
class TailBuffer {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size > 2 * this.limit) this.compact();
  }

  private compact(): void {
    const all = Buffer.concat(this.chunks);
    const tail = all.subarray(Math.max(0, all.length - this.limit));
    this.chunks = [tail];
    this.size = tail.length;
  }

  toString(): string {
    this.compact();
    return this.chunks[0]?.toString("utf8") ?? "";
  }
}

/**
 * Runs one BLAST+ executable with an argv array (never through a shell) and collects its output.
 *
 * Resolves with stdout and the stderr tail when the tool exits 0. Rejects with a
 * {@link BlastToolError} when it cannot start, exits non-zero, is killed, or writes more than
 * 16 MiB to stdout (results belong in `-out` files). When `signal` aborts, the process gets
 * SIGTERM, then SIGKILL after a grace period, and the promise rejects with an `AbortError`
 * only after the process has gone, so callers can safely clean up its files.
 */
export async function runBlastTool(
  tool: BlastTool,
  args: string[],
  options: RunBlastToolOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  // Callers in plain JS (or with casts) could pass any string; only known BLAST+ tools run.
  if (!TOOLS.has(tool)) throw new TypeError(`not a BLAST+ tool: ${String(tool)}`);
  for (const arg of args) {
    if (typeof arg !== "string" || arg.includes("\0")) throw new TypeError(`invalid argument for ${tool}`);
  }
  const { signal } = options;
  if (signal?.aborted) throw abortError(tool, signal.reason);

  // Resolved here, so a missing tool is reported as such rather than as setpriv's failure to exec.
  const executable = findExecutable(tool);
  const [command, argv] =
    SETPRIV && executable ? [SETPRIV, ["--pdeathsig", "KILL", "--", executable, ...args]] : [tool, args];

  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, {
      cwd: options.cwd,
      shell: false,
      stdio: ["ignore", "pipe", "pipe"],
      windowsHide: true,
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let overflow = false;
    const stderr = new TailBuffer(STDERR_TAIL_BYTES);
    let aborted = false;
    let settled = false;
    let killTimer: NodeJS.Timeout | undefined;

    const terminate = (): void => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      killTimer ??= setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }, KILL_GRACE_MS);
    };
    const onAbort = (): void => {
      aborted = true;
      terminate();
    };
    const finish = (action: () => void): void => {
      if (settled) return;
      settled = true;
      if (killTimer) clearTimeout(killTimer);
      signal?.removeEventListener("abort", onAbort);
      action();
    };

    signal?.addEventListener("abort", onAbort, { once: true });
    child.once("spawn", () => {
      if (child.pid !== undefined) options.onSpawn?.(child.pid);
    });
    child.stdout.on("data", (chunk: Buffer) => {
      if (overflow) return;
      stdoutBytes += chunk.length;
      if (stdoutBytes > STDOUT_LIMIT_BYTES) {
        overflow = true;
        stdout.length = 0;
        terminate();
        return;
      }
      stdout.push(chunk);
    });
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    child.once("error", (error: NodeJS.ErrnoException) => {
      // 'error' without a pid means the executable never started (ENOENT, EACCES).
      if (child.pid !== undefined) return;
      finish(() =>
        reject(
          new BlastToolError(`could not start ${tool}: ${error.message}`, tool, null, null, stderr.toString(), {
            cause: error,
          }),
        ),
      );
    });
    child.once("close", (code: number | null, exitSignal: NodeJS.Signals | null) => {
      finish(() => {
        const tail = stderr.toString();
        if (aborted) {
          reject(abortError(tool, signal?.reason));
        } else if (overflow) {
          reject(new BlastToolError(`${tool} wrote more than 16 MiB to stdout`, tool, code, exitSignal, tail));
        } else if (code === 0) {
          resolve({ stdout: Buffer.concat(stdout).toString("utf8"), stderr: tail });
        } else {
          const why = code === null ? `was killed by ${exitSignal ?? "a signal"}` : `exited with code ${code}`;
          const detail = lastLine(tail);
          reject(new BlastToolError(`${tool} ${why}${detail ? `: ${detail}` : ""}`, tool, code, exitSignal, tail));
        }
      });
    });
  });
}

function lastLine(text: string): string {
  const lines = text.split("\n").filter((line) => line.trim() !== "");
  return lines.at(-1)?.trim().slice(0, 500) ?? "";
}

let versionPromise: Promise<string> | undefined;

/**
 * The installed BLAST+ version as `blastn -version` reports it (e.g. "2.12.0+"), cached for the
 * life of the process; a failed probe is not cached.
 */
export async function blastVersion(): Promise<string> {
  versionPromise ??= runBlastTool("blastn", ["-version"]).then(({ stdout }) => {
    const match = /^blastn:\s*(\S+)/m.exec(stdout);
    if (!match?.[1]) throw new Error(`unexpected blastn -version output: ${stdout.slice(0, 200)}`);
    return match[1];
  });
  try {
    return await versionPromise;
  } catch (error) {
    versionPromise = undefined;
    throw error;
  }
}
