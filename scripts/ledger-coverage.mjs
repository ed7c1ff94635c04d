// Counts the requirement-ledger ids (`B-105`, `C-012`, …) that test titles cite, per spec document,
// and lists the uncited ones by ledger section. A test cites an id by naming it in its title (or in
// an enclosing describe's title); ranges such as "B-105..B-123" are not citations (each id is named),
// and are reported so they can be written out.
//
//   npm run ledger                      # the ledger at ../shared/spec/LEDGER.md (beside the repository)
//   npm run ledger -- --ledger <path>   # or LEDGER_PATH=<path>
//   npm run ledger -- --summary         # counts only, no list of uncited ids
//
// Plain JavaScript with no dependencies. Without a ledger it says so and exits 0 (a clone that
// does not carry the spec folder has nothing to count).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const ID = String.raw`[A-Z]-\d{3}`;
/** Two ids joined by "..", "…", "–", "—", "-" or " to ": a range, which cites neither. */
const RANGE = new RegExp(String.raw`\b(${ID})\s*(?:\.\.\.?|…|–|—|-|\bto\b)\s*(${ID})\b`, "g");
const CITED_ID = new RegExp(String.raw`\b${ID}\b`, "g");

/**
 * The ledger's rows: `{ id, section, document }` in ledger order. A row is a table line whose first
 * cell is an id; its section is the nearest `##` heading above it; its document comes from the
 * "Sources" lines (`- Part B: \`blast-control-plane.md\` (…), ids \`B-nnn\``).
 */
export function parseLedger(text) {
  const documents = new Map();
  for (const match of text.matchAll(/^- Part \w+: `([^`]+)`.*?ids `([A-Z])-nnn`/gm)) documents.set(match[2], match[1]);
  const rows = [];
  let section = "";
  for (const line of text.split("\n")) {
    const heading = /^##\s+(.+?)\s*$/.exec(line);
    if (heading) section = heading[1];
    const row = new RegExp(String.raw`^\|\s*(${ID})\s*\|`).exec(line);
    if (row) {
      const id = row[1];
      rows.push({ id, section, document: documents.get(id[0]) ?? `${id[0]} ids` });
    }
  }
  return rows;
}

/**
 * The titles in a test file's source: the first argument of `it`, `test` and `describe` (with any
 * `.each(…)`, `.concurrent`, … between) when it is a string or template literal.
 */
export function testTitles(source) {
  const titles = [];
  const call = /\b(?:it|test|describe)(?:\s*\.\s*\w+(?:\([^()]*\))?)*\s*\(\s*(["'`])/g;
  for (const match of source.matchAll(call)) {
    const quote = match[1];
    let end = match.index + match[0].length;
    let title = "";
    while (end < source.length && source[end] !== quote) {
      if (source[end] === "\\") {
        title += source[end + 1] ?? "";
        end += 2;
      } else {
        title += source[end];
        end += 1;
      }
    }
    titles.push(title);
  }
  return titles;
}

/** The ids a title cites, and the ranges it writes (which cite nothing). */
export function citationsIn(title) {
  const ranges = [...title.matchAll(RANGE)].map((match) => match[0]);
  const withoutRanges = title.replace(RANGE, " ");
  return { ids: [...new Set(withoutRanges.match(CITED_ID) ?? [])], ranges };
}

/** Counts per document, the uncited rows, ids cited that the ledger lacks, and ranges found. */
export function ledgerCoverage(rows, files) {
  // Only ids of this ledger's documents count (a test about this script may use made-up prefixes).
  const prefixes = new Set(rows.map((row) => row.id[0]));
  const ours = (id) => prefixes.has(id[0]);
  const cited = new Map();
  const ranges = [];
  for (const { file, source } of files) {
    for (const title of testTitles(source)) {
      const found = citationsIn(title);
      for (const id of found.ids.filter(ours)) cited.set(id, [...(cited.get(id) ?? []), file]);
      for (const range of found.ranges.filter(ours)) ranges.push({ file, range });
    }
  }
  const known = new Set(rows.map((row) => row.id));
  const documents = new Map();
  for (const row of rows) {
    const entry = documents.get(row.document) ?? { document: row.document, total: 0, cited: 0, uncited: [] };
    entry.total += 1;
    if (cited.has(row.id)) entry.cited += 1;
    else entry.uncited.push(row);
    documents.set(row.document, entry);
  }
  const unknown = [...cited.keys()].filter((id) => !known.has(id)).sort();
  return { documents: [...documents.values()], unknown, ranges };
}

/** Every `*.test.ts` under `dir`, as `{ file, source }` with paths relative to the repository. */
function testFiles(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...testFiles(full));
    else if (/\.test\.[cm]?[jt]sx?$/.test(entry.name))
      out.push({ file: path.relative(root, full), source: readFileSync(full, "utf8") });
  }
  return out;
}

/**
 * The configuration baseline's citations (`config/configuration-baseline.json`) whose excerpt is
 * not in the document it names. `documents` maps a document name to its text; a citation of a
 * document not given is not judged (the spec and DESIGN live beside the repository, not in it).
 */
export function missingBaselineCitations(baselineText, documents) {
  const squeeze = (s) => s.replace(/\s+/g, " ");
  const citations = JSON.parse(baselineText).citations ?? [];
  return citations
    .filter((c) => documents[c.document] !== undefined && !squeeze(documents[c.document]).includes(squeeze(c.excerpt)))
    .map((c) => `${c.id} (${c.document})`);
}

/**
 * The repository's own documents a baseline may cite: `README.md` and every Markdown file under
 * `docs/`, keyed by their path from the repository root (`docs/configuration.md`).
 */
export function repositoryDocuments(repositoryRoot) {
  const documents = {};
  const readme = path.join(repositoryRoot, "README.md");
  if (existsSync(readme)) documents["README.md"] = readFileSync(readme, "utf8");
  const walk = (dir) => {
    if (!existsSync(dir)) return;
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".md"))
        documents[path.relative(repositoryRoot, full).split(path.sep).join("/")] = readFileSync(full, "utf8");
    }
  };
  walk(path.join(repositoryRoot, "docs"));
  return documents;
}

function percent(part, whole) {
  return whole === 0 ? "0.0" : ((100 * part) / whole).toFixed(1);
}

function main(argv) {
  const flag = (name) => {
    const at = argv.indexOf(name);
    return at >= 0 ? argv[at + 1] : undefined;
  };
  const ledgerPath = path.resolve(
    flag("--ledger") ?? process.env.LEDGER_PATH ?? path.join(root, "../shared/spec/LEDGER.md"),
  );
  if (!existsSync(ledgerPath)) {
    console.log(`No ledger at ${ledgerPath}: nothing to count (pass --ledger <path> or set LEDGER_PATH).`);
    return;
  }
  const rows = parseLedger(readFileSync(ledgerPath, "utf8"));
  const report = ledgerCoverage(rows, testFiles(path.join(root, "test")));
  console.log(`Ledger ${ledgerPath}: ids cited in test titles`);
  for (const doc of report.documents)
    console.log(`  ${doc.document}: ${doc.cited} of ${doc.total} (${percent(doc.cited, doc.total)} %)`);
  const all = report.documents.reduce((sum, doc) => ({ cited: sum.cited + doc.cited, total: sum.total + doc.total }), {
    cited: 0,
    total: 0,
  });
  console.log(`  all: ${all.cited} of ${all.total} (${percent(all.cited, all.total)} %)`);
  if (report.unknown.length > 0) console.log(`Cited but not in the ledger: ${report.unknown.join(" ")}`);
  for (const { file, range } of report.ranges)
    console.log(`Range in a title (cites nothing; name each id): ${file}: "${range}"`);
  // The baseline cites the spec and DESIGN, which only this tool (beside them) can read.
  const contract = path.dirname(ledgerPath);
  const documents = repositoryDocuments(root);
  for (const [name, file] of [
    ["blast-control-plane.md", path.join(contract, "blast-control-plane.md")],
    ["operator-console.md", path.join(contract, "operator-console.md")],
    ["DESIGN.md", path.join(contract, "../DESIGN.md")],
  ]) {
    if (existsSync(file)) documents[name] = readFileSync(file, "utf8");
  }
  const baselineFile = path.join(root, "config/configuration-baseline.json");
  if (existsSync(baselineFile)) {
    const missing = missingBaselineCitations(readFileSync(baselineFile, "utf8"), documents);
    if (missing.length > 0) {
      console.log(
        `Configuration baseline citations whose excerpt is no longer in their document: ${missing.join(", ")}`,
      );
      process.exitCode = 1;
    } else
      console.log(
        `Configuration baseline citations: every excerpt found in ${Object.keys(documents).length} documents`,
      );
  }
  if (argv.includes("--summary")) return;
  for (const doc of report.documents) {
    if (doc.uncited.length === 0) continue;
    console.log(`\nUncited in ${doc.document}:`);
    const bySection = new Map();
    for (const row of doc.uncited) bySection.set(row.section, [...(bySection.get(row.section) ?? []), row.id]);
    for (const [section, ids] of bySection) console.log(`  ${section}: ${ids.join(" ")}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href)
  main(process.argv.slice(2));
