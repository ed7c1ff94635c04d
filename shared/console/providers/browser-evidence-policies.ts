import { z } from "zod";
import { loadCatalogFile } from "../../ops/catalog/json-catalog.js";

/*
 * The server-owned policies of `capture_browser_evidence` (`config/browser-evidence-policies.json`),
 * apart from the provider so that the Functions app validates them at start without loading the
 * provider (which lives in the console's lazily loaded chunk).
 */

/** An https origin exactly (`https://host[:port]`): no path, no wildcard, no credentials. */
const httpsOrigin = z
  .string()
  .max(300)
  .refine((text) => {
    try {
      const url = new URL(text);
      return (
        url.protocol === "https:" &&
        url.origin === text &&
        /^(?:[a-z0-9-]+\.)*[a-z0-9-]+$|^\[[0-9a-f:.]+\]$/i.test(url.hostname)
      );
    } catch {
      return false;
    }
  }, "must be an exact https origin such as https://status.example.org (no path, no wildcard)");

const policySchema = z.strictObject({
  id: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/),
  version: z.number().int().min(1),
  description: z.string().min(1).max(500),
  allowed_origins: z.array(httpsOrigin).min(1).max(20),
  /** All bytes the page may receive, over every response. */
  max_bytes: z.number().int().min(1024).max(50_000_000),
  /** From the first request to the last element captured. */
  max_time_ms: z.number().int().min(1000).max(120_000),
  viewport: z.strictObject({ width: z.number().int().min(320).max(3840), height: z.number().int().min(240).max(2160) }),
  /** The only selectors a capture under this policy may name. */
  selectors: z.array(z.string().min(1).max(200)).min(1).max(20),
});
export type BrowserEvidencePolicy = z.infer<typeof policySchema>;

export const browserEvidencePolicyCatalogSchema = z
  .strictObject({ version: z.number().int().min(1), policies: z.array(policySchema).max(100) })
  .refine((c) => new Set(c.policies.map((p) => p.id)).size === c.policies.length, {
    message: "policy ids are unique (one current version each)",
    path: ["policies"],
  });
export type BrowserEvidencePolicyCatalog = z.infer<typeof browserEvidencePolicyCatalogSchema>;

/** Loads and validates `config/browser-evidence-policies.json`; a bad file throws naming the file and line. */
export function loadBrowserEvidencePolicies(file: string): BrowserEvidencePolicyCatalog {
  return loadCatalogFile(file, browserEvidencePolicyCatalogSchema);
}
