/** Types of `ledger-coverage.mjs` (plain JavaScript, so it runs without a build). */
export interface LedgerRow {
  id: string;
  section: string;
  document: string;
}
export interface DocumentCoverage {
  document: string;
  total: number;
  cited: number;
  uncited: LedgerRow[];
}
export interface LedgerCoverage {
  documents: DocumentCoverage[];
  unknown: string[];
  ranges: { file: string; range: string }[];
}
export function parseLedger(text: string): LedgerRow[];
export function testTitles(source: string): string[];
export function citationsIn(title: string): { ids: string[]; ranges: string[] };
export function ledgerCoverage(rows: LedgerRow[], files: { file: string; source: string }[]): LedgerCoverage;
export function missingBaselineCitations(baselineText: string, documents: Record<string, string>): string[];
export function repositoryDocuments(repositoryRoot: string): Record<string, string>;
