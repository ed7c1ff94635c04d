// Deterministic synthetic nucleotide data for the benchmark: a database of sequence families
// (each member a mutated copy of its family's ancestor, so searches find real, graded hits) padded
// with unrelated background sequence, and a query FASTA of mutated family members plus a few
// unrelated queries. The same seed always gives the same bytes, so runs compare like with like.
import { once } from "node:events";
import { createWriteStream } from "node:fs";

const BASES = "ACGT";
const LINE = 80;

/** mulberry32: tiny, fast, and good enough to shuffle bases; seeded so the data is repeatable. */
export function createRandom(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
  };
}

function randomSequence(rng, length) {
  const out = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) out[i] = BASES.charCodeAt((rng.next() * 4) | 0);
  return out.toString("latin1");
}

/**
 * A copy of `seq` with substitutions at rate `rate` and short indels at a tenth of that rate,
 * the way related genes drift apart.
 */
export function mutate(rng, seq, rate) {
  const parts = [];
  const indelRate = rate / 10;
  for (let i = 0; i < seq.length; i++) {
    const r = rng.next();
    if (r < indelRate / 2) continue; // deletion
    if (r < indelRate) parts.push(BASES[(rng.next() * 4) | 0]); // insertion before this base
    parts.push(rng.next() < rate ? BASES[(rng.next() * 4) | 0] : seq[i]);
  }
  return parts.join("");
}

function fastaRecord(id, description, seq) {
  const lines = [`>${id} ${description}`];
  for (let i = 0; i < seq.length; i += LINE) lines.push(seq.slice(i, i + LINE));
  return `${lines.join("\n")}\n`;
}

async function writeAll(stream, text) {
  if (!stream.write(text)) await once(stream, "drain");
}

/**
 * Writes `dbPath` (FASTA) and `queryPath` (FASTA) and returns what was generated.
 *
 * The database holds `families` families of `membersPerFamily` members (ancestor length
 * `memberLength` ± 20 %, member divergence 2–25 %), each family followed by unrelated background
 * records (at most `backgroundLength` each) so the whole holds `totalLetters`. Queries are windows of `queryLength` from mutated members (3–12 % divergence) of
 * `relatedQueries` different families, plus `unrelatedQueries` random sequences with no homologs.
 */
export async function generateData(options) {
  const {
    seed,
    dbPath,
    queryPath,
    totalLetters,
    families,
    membersPerFamily,
    memberLength,
    backgroundLength,
    relatedQueries,
    unrelatedQueries,
    queryLength,
  } = options;
  const rng = createRandom(seed);
  const ancestors = [];
  const db = createWriteStream(dbPath, { encoding: "latin1" });
  let letters = 0;
  let sequences = 0;
  let background = 0;
  const sampleMembers = [];
  for (let f = 0; f < families; f++) {
    const length = Math.round(memberLength * (0.8 + 0.4 * rng.next()));
    const ancestor = randomSequence(rng, length);
    ancestors.push(ancestor);
    for (let m = 0; m < membersPerFamily; m++) {
      const divergence = 0.02 + 0.23 * (m / Math.max(1, membersPerFamily - 1));
      const member = mutate(rng, ancestor, divergence);
      if (m === 0) sampleMembers.push(member);
      await writeAll(
        db,
        fastaRecord(`fam${f}_m${m}`, `synthetic family ${f} member ${m} divergence ${divergence.toFixed(3)}`, member),
      );
      letters += member.length;
      sequences++;
    }
    // Background after each family, so families spread over the whole database (and over every
    // partition) as related genes do in real collections.
    const goal = Math.round(((f + 1) / families) * totalLetters);
    while (letters < goal) {
      const length = Math.min(backgroundLength, goal - letters);
      await writeAll(
        db,
        fastaRecord(`bg${background}`, `synthetic background ${background}`, randomSequence(rng, length)),
      );
      background++;
      letters += length;
      sequences++;
    }
  }
  db.end();
  await once(db, "finish");

  const queries = [];
  const stride = Math.max(1, Math.floor(families / Math.max(1, relatedQueries)));
  for (let q = 0; q < relatedQueries; q++) {
    const member = sampleMembers[(q * stride) % families];
    const variant = mutate(rng, member, 0.03 + 0.09 * rng.next());
    const start = rng.int(0, Math.max(0, variant.length - queryLength));
    queries.push(
      fastaRecord(
        `query${q}`,
        `mutated window of family ${(q * stride) % families}`,
        variant.slice(start, start + queryLength),
      ),
    );
  }
  for (let q = 0; q < unrelatedQueries; q++) {
    queries.push(fastaRecord(`random${q}`, "unrelated random sequence", randomSequence(rng, queryLength)));
  }
  const queryFasta = queries.join("");
  const qs = createWriteStream(queryPath, { encoding: "latin1" });
  qs.end(queryFasta);
  await once(qs, "finish");
  return {
    letters,
    sequences,
    queries: queries.length,
    queryLetters: (relatedQueries + unrelatedQueries) * queryLength,
    queryFasta,
  };
}
