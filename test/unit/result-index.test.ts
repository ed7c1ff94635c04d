import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { gunzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { memberSpan, ResultIndexBuilder } from "../../shared/blast/result-index.js";
import { createParallelGzip } from "../../shared/storage/parallel-gzip.js";

function hsp(num: number, bits: string, evalue: string): string {
  return `
        <Hsp>
          <Hsp_num>${num}</Hsp_num>
          <Hsp_bit-score>${bits}</Hsp_bit-score>
          <Hsp_score>${Math.round(Number(bits) * 2)}</Hsp_score>
          <Hsp_evalue>${evalue}</Hsp_evalue>
          <Hsp_query-from>1</Hsp_query-from>
          <Hsp_query-to>20</Hsp_query-to>
          <Hsp_hit-from>101</Hsp_hit-from>
          <Hsp_hit-to>120</Hsp_hit-to>
          <Hsp_query-frame>1</Hsp_query-frame>
          <Hsp_hit-frame>-1</Hsp_hit-frame>
          <Hsp_identity>19</Hsp_identity>
          <Hsp_positive>19</Hsp_positive>
          <Hsp_gaps>0</Hsp_gaps>
          <Hsp_align-len>20</Hsp_align-len>
          <Hsp_qseq>ACGTACGTACGTACGTACGT</Hsp_qseq>
          <Hsp_hseq>ACGTACGTACGTACGTACGA</Hsp_hseq>
          <Hsp_midline>||||||||||||||||||| </Hsp_midline>
        </Hsp>`;
}

function hit(num: number, def: string, hsps: string[]): string {
  return `
    <Hit>
      <Hit_num>${num}</Hit_num>
      <Hit_id>gnl|BL_ORD_ID|${num}</Hit_id>
      <Hit_def>${def}</Hit_def>
      <Hit_accession>NR_${1000 + num}.1</Hit_accession>
      <Hit_len>1500</Hit_len>
      <Hit_hsps>${hsps.join("")}
      </Hit_hsps>
    </Hit>`;
}

function iteration(n: number, def: string, len: number, hits: string[]): string {
  const body =
    hits.length > 0
      ? `<Iteration_hits>${hits.join("")}
  </Iteration_hits>`
      : `<Iteration_hits>
  </Iteration_hits>
  <Iteration_message>No hits found</Iteration_message>`;
  return `<Iteration>
  <Iteration_iter-num>${n}</Iteration_iter-num>
  <Iteration_query-ID>Query_${n}</Iteration_query-ID>
  <Iteration_query-def>${def}</Iteration_query-def>
  <Iteration_query-len>${len}</Iteration_query-len>
  ${body}
  <Iteration_stat><Statistics><Statistics_db-num>60</Statistics_db-num></Statistics></Iteration_stat>
</Iteration>
`;
}

/** A multi-query BLAST XML document: hits, a query without hits, deflines with escapes and UTF-8. */
const iterations = [
  iteration(1, "seq1 Escherichia coli 16S &amp; friends", 1542, [
    hit(1, "E. coli &lt;strain K-12&gt;", [hsp(1, "2700.5", "0"), hsp(2, "40.1", "1e-3")]),
    hit(2, "Shigella", [hsp(1, "2650", "1.5e-170")]),
  ]),
  iteration(2, "seq2 nothing matches &quot;here&quot;", 80, []),
  iteration(3, "seq3 Bacillus subtilis — café &#x3b1;-helix &apos;x&apos;", 1500, [
    hit(1, "B. subtilis", [hsp(1, "99.9", "2e-20")]),
  ]),
];
const header = `<?xml version="1.0"?>
<!DOCTYPE BlastOutput PUBLIC "-//NCBI//NCBI BlastOutput/EN" "http://www.ncbi.nlm.nih.gov/dtd/NCBI_BlastOutput.dtd">
<BlastOutput>
  <BlastOutput_program>blastn</BlastOutput_program>
  <BlastOutput_version>BLASTN 2.12.0+</BlastOutput_version>
  <BlastOutput_db>demo</BlastOutput_db>
  <BlastOutput_iterations>
`;
const xml = Buffer.from(`${header}${iterations.join("")}</BlastOutput_iterations>\n</BlastOutput>\n`, "utf8");

function indexIn(chunkBytes: number) {
  const builder = new ResultIndexBuilder();
  for (let at = 0; at < xml.length; at += chunkBytes) builder.write(xml.subarray(at, at + chunkBytes));
  return builder.finish([[0, 0]]);
}

describe("result index builder (issue 23 item 2)", () => {
  it("records each query's exact byte range and summary, whatever the chunk boundaries", () => {
    const whole = indexIn(xml.length);
    for (const size of [1, 3, 7, 11, 64, 1000]) expect(indexIn(size)).toEqual(whole);
    expect(whole.program).toBe("blastn");
    expect(whole.database).toBe("demo");
    expect(whole.xml_bytes).toBe(xml.length);
    expect(whole.queries).toHaveLength(3);
    for (const [i, q] of whole.queries.entries()) {
      // The range is the iteration, byte for byte (multi-byte UTF-8 before it included).
      expect(xml.subarray(q.range[0], q.range[1]).toString("utf8")).toBe(iterations[i]?.trimEnd());
    }
    expect(whole.queries.map(({ range: _, ...q }) => q)).toEqual([
      {
        n: 1,
        id: "Query_1",
        def: "seq1 Escherichia coli 16S & friends",
        len: 1542,
        hits: 2,
        best_evalue: 0,
        best_bits: 2700.5,
      },
      { n: 2, id: "Query_2", def: 'seq2 nothing matches "here"', len: 80, hits: 0, best_evalue: null, best_bits: null },
      {
        n: 3,
        id: "Query_3",
        def: "seq3 Bacillus subtilis — café α-helix 'x'",
        len: 1500,
        hits: 1,
        best_evalue: 2e-20,
        best_bits: 99.9,
      },
    ]);
  });

  it("a document that ends inside an iteration is not indexed", () => {
    const builder = new ResultIndexBuilder();
    builder.write(xml.subarray(0, xml.indexOf("</Iteration>")));
    expect(() => builder.finish([])).toThrow(/no <\/Iteration>/);
  });

  it("the member table of a parallel gzip locates each query: its members, gunzipped, hold its range", async () => {
    const members: [number, number][] = [];
    let c = 0;
    let u = 0;
    const parts: Buffer[] = [];
    await pipeline(
      Readable.from([xml]),
      createParallelGzip({
        memberBytes: 256,
        onMember(compressed, uncompressed) {
          members.push([c, u]);
          c += compressed;
          u += uncompressed;
        },
      }),
      async (source: AsyncIterable<Buffer>) => {
        for await (const part of source) parts.push(part);
      },
    );
    const stored = Buffer.concat(parts);
    expect(c).toBe(stored.length);
    expect(u).toBe(xml.length);
    expect(members.length).toBeGreaterThan(10);
    const builder = new ResultIndexBuilder();
    builder.write(xml);
    const index = builder.finish(members);
    for (const q of index.queries) {
      const span = memberSpan(index, q.range, stored.length);
      // Only the members covering the range are read.
      expect(span.count).toBeLessThan(stored.length);
      const text = gunzipSync(stored.subarray(span.offset, span.offset + span.count)).subarray(
        span.skip,
        span.skip + q.range[1] - q.range[0],
      );
      expect(text.equals(xml.subarray(q.range[0], q.range[1]))).toBe(true);
    }
  });
});
