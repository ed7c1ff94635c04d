import { spawn } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ROOT } from "./local-stack.js";

/** One fenced shell block of a Markdown file: its code, the line its fence is on, and whether it runs. */
export interface ShellBlock {
  code: string;
  line: number;
  /** False for a block fenced ```sh no-doctest (npm start, npm test: not runnable inside a test). */
  run: boolean;
}

/** The annotation after ```sh that keeps a block out of the doc test. */
export const NO_DOCTEST = "no-doctest";

/** The ```sh (or ```bash) blocks of `markdown`, in order. Other fences (```json, plain ```) are not shell. */
export function shellBlocks(markdown: string): ShellBlock[] {
  const blocks: ShellBlock[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\S*)\s*(.*)$/.exec(lines[i] ?? "");
    if (!fence) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
    if (end === -1) break;
    if (["sh", "bash", "shell"].includes(fence[1] ?? ""))
      blocks.push({
        code: lines.slice(i + 1, end).join("\n"),
        line: i + 1,
        run: !(fence[2] ?? "").split(/\s+/).includes(NO_DOCTEST),
      });
    i = end;
  }
  return blocks;
}

/** An error envelope in a command's output (`{"detail": …, "request_id": …}`, both services). */
export const ERROR_ENVELOPE = /\{\s*"detail"\s*:[\s\S]*?"request_id"\s*:/;

/**
 * A folder to run documented commands in as a reader would in the clone, without writing into
 * this checkout: the clone's `local/` (the demo FASTA the walk-through reads) is linked in, and
 * `npx blastplane` runs this checkout's bin/blastplane.mjs (a shim first on PATH: in a folder that
 * is not the project, npx would look the name up in the registry).
 */
export function docWorkspace(): { cwd: string; path: string } {
  const cwd = mkdtempSync(path.join(tmpdir(), "bp-doc-"));
  symlinkSync(path.join(ROOT, "local"), path.join(cwd, "local"));
  const bin = path.join(cwd, ".bin");
  mkdirSync(bin);
  const npx = path.join(bin, "npx");
  writeFileSync(
    npx,
    [
      "#!/usr/bin/env bash",
      `if [ "$1" = blastplane ]; then shift; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(ROOT, "bin/blastplane.mjs"))} "$@"; fi`,
      'echo "doc test: only npx blastplane is available here" >&2; exit 127',
      "",
    ].join("\n"),
  );
  chmodSync(npx, 0o755);
  return { cwd, path: `${bin}:${process.env.PATH ?? ""}` };
}

/** Runs `code` with `bash -eo pipefail` (a failing command or pipe stage ends it), stdout and stderr together. */
export function runBash(
  code: string,
  options: { cwd: string; env: Record<string, string | undefined> },
): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-eo", "pipefail", "-c", code], {
      cwd: options.cwd,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.stderr.on("data", (c: Buffer) => {
      output += c.toString();
    });
    child.on("close", (exit) => resolve({ code: exit, output }));
  });
}
