import { runBlastTool } from "../../shared/blast/blast-tools.js";
import { BLAST_PROGRAMS, type BlastProgram } from "../../shared/blast/programs.js";
import { createSemaphore, type ShardExecutor } from "./executor.js";

/**
 * Runs shards as BLAST+ processes on this machine, at most `concurrency` at once (one per core by
 * default). Cancelling a job aborts its processes.
 */
export function createLocalExecutor(options: { concurrency: number }): ShardExecutor {
  const slots = createSemaphore(options.concurrency);
  return {
    name: "local",
    oneNode: true,
    async run(spec, signal) {
      if (!(BLAST_PROGRAMS as readonly string[]).includes(spec.program))
        throw new Error(`unknown program ${spec.program}`);
      const release = await slots.acquire(signal);
      try {
        await runBlastTool(spec.program as BlastProgram, spec.args, { signal, cwd: spec.cwd });
      } finally {
        release();
      }
    },
  };
}
