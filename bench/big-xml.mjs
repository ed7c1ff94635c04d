// A ~1 GB merged BLAST XML result made from a real BLAST output: its header and trailer once, and
// its <Iteration> blocks repeated (renumbered, as a merged result numbers them) until the target
// size. Written gzip-compressed at level 1, as the merged artifact is stored.
import { createWriteStream } from "node:fs";
import { readFile } from "node:fs/promises";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";

const OPEN = "<BlastOutput_iterations>";
const CLOSE = "</BlastOutput_iterations>";

/** Splits a BLAST XML document (read as latin1, so bytes map 1:1 to characters) into its parts. */
export function splitBlastXml(text) {
  const open = text.indexOf(OPEN);
  const close = text.lastIndexOf(CLOSE);
  if (open < 0 || close < 0) throw new Error("not a BLAST XML document with <BlastOutput_iterations>");
  const body = text.slice(open + OPEN.length, close);
  const iterations = body.match(/<Iteration>[\s\S]*?<\/Iteration>\n?/g) ?? [];
  if (iterations.length === 0) throw new Error("the BLAST XML holds no iterations");
  return {
    header: text.slice(0, open + OPEN.length),
    lead: body.slice(0, body.indexOf("<Iteration>")),
    iterations,
    trailer: text.slice(close),
  };
}

/**
 * Writes `outPath` (gzip) holding a BLAST XML document of at least `targetBytes` built from the
 * BLAST XML at `samplePath`. Returns the uncompressed size and the iteration count.
 */
export async function writeBigBlastXml({ samplePath, outPath, targetBytes }) {
  const { header, lead, iterations, trailer } = splitBlastXml(await readFile(samplePath, "latin1"));
  let bytes = 0;
  let count = 0;
  function* chunks() {
    const first = header + lead;
    bytes += first.length;
    yield Buffer.from(first, "latin1");
    for (let round = 0; bytes < targetBytes; round++) {
      for (const iteration of iterations) {
        count++;
        const text = iteration
          .replace(/<Iteration_iter-num>\d+<\/Iteration_iter-num>/, `<Iteration_iter-num>${count}</Iteration_iter-num>`)
          .replace(
            /<Iteration_query-ID>Query_\d+<\/Iteration_query-ID>/,
            `<Iteration_query-ID>Query_${count}</Iteration_query-ID>`,
          )
          .replace(
            /<Iteration_query-def>([^<]*)<\/Iteration_query-def>/,
            `<Iteration_query-def>$1 copy ${round}</Iteration_query-def>`,
          );
        bytes += text.length;
        yield Buffer.from(text, "latin1");
        if (bytes >= targetBytes) break;
      }
    }
    bytes += trailer.length;
    yield Buffer.from(trailer, "latin1");
  }
  await pipeline(Readable.from(chunks(), { objectMode: false }), createGzip({ level: 1 }), createWriteStream(outPath));
  return { xmlBytes: bytes, iterations: count };
}
