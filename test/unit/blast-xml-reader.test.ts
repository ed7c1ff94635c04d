import { describe, expect, it } from "vitest";
import { BlastXmlError, type BlastXmlEvent, readBlastXml } from "../../shared/blast/xml-merge.js";

/** A small BLAST XML document of three queries (hits, HSPs, one query without hits). */
function document(): string {
  const hsp = (evalue: string, score: number) =>
    `<Hsp><Hsp_num>1</Hsp_num><Hsp_score>${score}</Hsp_score><Hsp_evalue>${evalue}</Hsp_evalue><Hsp_qseq>ACGT</Hsp_qseq></Hsp>`;
  const hit = (n: number, hsps: string) =>
    `\n<Hit>\n  <Hit_num>${n}</Hit_num>\n  <Hit_id>gnl|BL_ORD_ID|${n}</Hit_id>\n  <Hit_hsps>${hsps}</Hit_hsps>\n</Hit>`;
  const iteration = (n: number, hits: string) =>
    `<Iteration>\n  <Iteration_iter-num>${n}</Iteration_iter-num>\n  <Iteration_query-ID>Query_${n}</Iteration_query-ID>\n` +
    `  <Iteration_query-def>q${n} caf\u00c3\u00a9</Iteration_query-def>\n  <Iteration_query-len>40</Iteration_query-len>\n` +
    `<Iteration_hits>${hits}\n</Iteration_hits>\n` +
    `  <Iteration_stat><Statistics><Statistics_db-num>60</Statistics_db-num></Statistics></Iteration_stat>\n` +
    `${hits === "" ? "  <Iteration_message>No hits found</Iteration_message>\n" : ""}</Iteration>\n`;
  return (
    `<?xml version="1.0"?>\n<BlastOutput>\n  <BlastOutput_program>blastn</BlastOutput_program>\n` +
    `  <BlastOutput_db>demo</BlastOutput_db>\n  <BlastOutput_iterations>\n` +
    iteration(1, hit(1, hsp("1e-30", 90) + hsp("2e-5", 30)) + hit(2, hsp("0", 120))) +
    iteration(2, "") +
    iteration(3, hit(1, hsp("3.5e-12", 55))) +
    `  </BlastOutput_iterations>\n</BlastOutput>\n`
  );
}

async function* chunks(text: string, size: number): AsyncGenerator<Uint8Array> {
  const bytes = Buffer.from(text, "latin1");
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

/** What the reader reports, as comparable values (the hits' ranking keys and raw text). */
async function read(source: AsyncIterable<Uint8Array>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const event of readBlastXml(source) as AsyncGenerator<BlastXmlEvent>) {
    if (event.type === "header") out.push(["header", event.header.raw, event.header.fields]);
    else if (event.type === "iteration") {
      const { hits, ...rest } = event.iteration;
      out.push(["iteration", rest, hits.map((h) => [h.raw, h.bestEvalue, h.topScore])]);
    } else out.push(["end", event.trailer]);
  }
  return out;
}

describe("BLAST XML reader", () => {
  it("reads the same document whatever the size of the chunks it arrives in (markers split across chunks)", async () => {
    const text = document();
    const whole = await read(chunks(text, text.length));
    expect(whole).toHaveLength(5);
    for (let size = 1; size <= 64; size++) expect(await read(chunks(text, size))).toEqual(whole);
    for (const size of [100, 257, 1000, 4096]) expect(await read(chunks(text, size))).toEqual(whole);
  });

  it("fails a document cut anywhere with BlastXmlError, in any chunking", async () => {
    const text = document();
    const end = text.lastIndexOf("</BlastOutput>");
    for (let cut = 0; cut < end; cut += 7)
      for (const size of [5, 13, 4096])
        await expect(read(chunks(text.slice(0, cut), size)), `cut at ${cut}, chunks of ${size}`).rejects.toThrow(
          BlastXmlError,
        );
  });
});
