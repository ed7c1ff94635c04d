import { readFileSync } from "node:fs";
import path from "node:path";
import yauzl from "yauzl";
import { eventually, type TestStack } from "./local-stack.js";

export const DEMO_DB = "16s_rrna_demo";
const DEMO_FASTA = path.resolve(import.meta.dirname, "../../local/demo/16s-rrna-demo.fasta");

/** The first `n` records of the shipped demo FASTA (real 16S rRNA sequences), optionally trimmed. */
export function demoQueries(n: number, maxLetters = 600, skip = 0): string {
  const records = readFileSync(DEMO_FASTA, "utf8")
    .split(/^>/m)
    .filter((r) => r.trim() !== "");
  return records
    .slice(skip, skip + n)
    .map((r) => {
      const [header, ...lines] = r.split("\n");
      return `>${header}\n${lines.join("").slice(0, maxLetters)}\n`;
    })
    .join("");
}

export function jobApi(stack: TestStack, token: string) {
  const base = stack.info.jobapi_url;
  const headers = (extra: Record<string, string> = {}) => ({ "X-SVC-API-Token": token, ...extra });
  return {
    base,
    get: (p: string, extra: Record<string, string> = {}) => fetch(`${base}${p}`, { headers: headers(extra) }),
    del: (p: string) => fetch(`${base}${p}`, { method: "DELETE", headers: headers() }),
    post: (p: string, body: unknown) =>
      fetch(`${base}${p}`, {
        method: "POST",
        headers: headers({ "Content-Type": "application/json" }),
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    async submit(body: Record<string, unknown>): Promise<{ job_id: string; [k: string]: unknown }> {
      const res = await this.post("/v1/jobs", body);
      if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${await res.text()}`);
      return (await res.json()) as { job_id: string };
    },
    async status(jobId: string): Promise<Record<string, unknown>> {
      return (await (await this.get(`/v1/jobs/${jobId}/status`)).json()) as Record<string, unknown>;
    },
    async finished(jobId: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
      return eventually(
        async () => {
          const s = await this.status(jobId);
          return ["completed", "failed", "cancelled"].includes(String(s.status)) ? s : undefined;
        },
        timeoutMs,
        100,
      );
    },
  };
}

/** Lists a ZIP's entries and their bytes. */
export async function unzip(buffer: Buffer): Promise<Map<string, Buffer>> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.fromBuffer(buffer, { lazyEntries: true }, (err, z) => (err || !z ? reject(err) : resolve(z))),
  );
  const out = new Map<string, Buffer>();
  await new Promise<void>((resolve, reject) => {
    zip.on("entry", (entry: yauzl.Entry) => {
      zip.openReadStream(entry, (err, stream) => {
        if (err || !stream) return reject(err);
        const chunks: Buffer[] = [];
        stream.on("data", (c: Buffer) => chunks.push(c));
        stream.on("end", () => {
          out.set(entry.fileName, Buffer.concat(chunks));
          zip.readEntry();
        });
      });
    });
    zip.on("end", () => resolve());
    zip.on("error", reject);
    zip.readEntry();
  });
  return out;
}

/** Reads the job API token the running stack created. */
export function readApiToken(stack: TestStack): string {
  const file = path.join(stack.dataDir, "jobapi", "secrets", "jobapi-api-token");
  return (JSON.parse(readFileSync(file, "utf8")) as { current: { value: string } }).current.value;
}
