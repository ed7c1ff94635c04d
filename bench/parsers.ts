/**
 * Bench (parsers): the input parsers' running time, which the unit tests no longer time (the house
 * rule: no timing assertions in tests; test/unit/fasta.test.ts and test/unit/ncrontab.test.ts keep
 * the results). Each figure is a ratio against a baseline measured in the same run, so a busy
 * machine moves both sides:
 *
 * - FASTA (shared/blast/fasta.ts): each large or adversarial query input (the ones the unit test
 *   parses) at its full size against the same input at a quarter of it. Linear time gives ~4×;
 *   quadratic ~16×. Target: at most 8×.
 * - NCRONTAB (shared/config/ncrontab.ts): the next 100 occurrences of 29 February (408 years) and
 *   three leap-year lookups against the next 100 occurrences of a daily schedule. The search skips
 *   by fields, not by seconds, so a sparse schedule costs a small multiple of a dense one. Target:
 *   at most 50×.
 *
 * Each side is the median of BENCH_PARSER_RUNS (default 5) samples, the two sides alternating. Run by
 * `node bench/parsers.mjs` (about a minute); a MISS is reported and the process exits 1.
 */
import { parseQueryFasta } from "../shared/blast/fasta.js";
import { parseNcrontab } from "../shared/config/ncrontab.js";

const RUNS = Math.max(1, Number(process.env.BENCH_PARSER_RUNS ?? 5));
const TARGETS = { fastaRatio: 8, ncrontabRatio: 50 };

/** The unit test's inputs, `scale` 1 being the test's size (9.2 MB, 10,000 records, ...). */
const FASTA_CASES: { name: string; text: (scale: number) => string }[] = [
  {
    name: "9 sequences of 1,000,000 letters in 60-letter lines",
    text: (scale) =>
      Array.from(
        { length: 9 },
        (_, i) => `>s${i}\n${"ACGTN".repeat(200_000 * scale).replace(/(.{60})/g, "$1\n")}`,
      ).join("\n"),
  },
  {
    name: "10,000 records (the limit) of 4 letters",
    text: (scale) => Array.from({ length: 10_000 * scale }, (_, i) => `>s${i} d\nACGT\n`).join(""),
  },
  { name: "2,000,000 whitespace-only lines", text: (scale) => `>a\n${" \n".repeat(2_000_000 * scale)}A` },
  { name: "900,000 runs of spaces and tabs inside a line", text: (scale) => `>a\n${"A  \t".repeat(900_000 * scale)}` },
];

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

function timed(work: () => unknown): number {
  const started = performance.now();
  work();
  return performance.now() - started;
}

/**
 * Median ms of `ours` and of `baseline`, measured alternately (which goes first alternates too),
 * after two untimed runs of each (the JIT). A sample repeats its work until the baseline's takes
 * ~20 ms (a lone run of a small input is mostly timer and GC noise); the ms are per repetition.
 */
function pair(ours: () => unknown, baseline: () => unknown): { ms: number; baseline_ms: number; ratio: number } {
  for (let i = 0; i < 2; i++) {
    ours();
    baseline();
  }
  const repeat = Math.max(1, Math.ceil(20 / Math.max(timed(baseline), 0.01)));
  const sample = (work: () => unknown) =>
    timed(() => {
      for (let i = 0; i < repeat; i++) work();
    }) / repeat;
  const a: number[] = [];
  const b: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    if (run % 2 === 0) {
      a.push(sample(ours));
      b.push(sample(baseline));
    } else {
      b.push(sample(baseline));
      a.push(sample(ours));
    }
  }
  const [ms, baselineMs] = [median(a), median(b)];
  return { ms: round(ms), baseline_ms: round(baselineMs), ratio: round(ms / baselineMs) };
}

const round = (n: number) => Math.round(n * 100) / 100;

const results: Record<string, unknown>[] = [];
for (const c of FASTA_CASES) {
  const full = c.text(1);
  const quarter = c.text(0.25);
  const r = pair(
    () => parseQueryFasta(full, "nucl"),
    () => parseQueryFasta(quarter, "nucl"),
  );
  results.push({
    metric: `fasta: ${c.name}`,
    ...r,
    target_ratio: TARGETS.fastaRatio,
    pass: r.ratio <= TARGETS.fastaRatio,
  });
}

const leapDay = parseNcrontab("0 0 0 29 2 *");
const daily = parseNcrontab("0 0 0 * * *");
const hundred = (schedule: ReturnType<typeof parseNcrontab>) => {
  let t = new Date("2000-01-01T00:00:00Z");
  for (let i = 0; i < 100; i++) t = schedule.next(t);
  return t;
};
const lookups = () => {
  for (const from of ["2025-01-01T00:00:00Z", "2028-02-29T00:00:00Z", "2096-03-01T00:00:00Z"])
    leapDay.next(new Date(from));
};
for (const [name, work] of [
  ["ncrontab: next 100 occurrences of 29 February", () => hundred(leapDay)],
  ["ncrontab: three leap-year lookups (8 years across 2100)", lookups],
] as const) {
  const r = pair(work, () => hundred(daily));
  results.push({ metric: name, ...r, target_ratio: TARGETS.ncrontabRatio, pass: r.ratio <= TARGETS.ncrontabRatio });
}

for (const r of results)
  process.stdout.write(
    `${r.pass ? "ok  " : "MISS"} ${String(r.metric).padEnd(70)} ${String(r.ms).padStart(9)} ms vs ${String(r.baseline_ms).padStart(9)} ms = ${r.ratio}× (target ≤ ${r.target_ratio}×)\n`,
  );
process.stdout.write(`${JSON.stringify({ parsers: results })}\n`);
process.exitCode = results.every((r) => r.pass) ? 0 : 1;
