import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { ContainerClient } from "@azure/storage-blob";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { EXAMPLE_QUERY } from "../../web/src/example-query.js";
import { demoQueries } from "../support/jobapi-client.js";
import { mintToken, ROOT, startStack, type TestStack } from "../support/local-stack.js";
import { checkPage, expectAccessible, launchChromium } from "./browser.js";

/*
 * The dashboard as a person uses it: real Chromium, the real local stack (Azurite, BLAST+, the
 * development identity provider's PKCE sign-in). One stack for the file.
 *
 * The job API is told its node has 180,000 bytes of memory and keeps no margin: the demo database
 * needs ~240 KB cached whole and ~120 KB per partition, so a standard search fails the memory
 * pre-flight and a sharded one runs, which shows both paths with the same database.
 */
const STACK_ENV = {
  JOBAPI_NODE_MEMORY_BYTES: "180000",
  JOBAPI_MEMORY_MARGIN_BYTES: "0",
  JOB_POLL_INTERVAL_SECONDS: "1",
};

let stack: TestStack;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  [stack, browser] = await Promise.all([startStack({ env: STACK_ENV }), launchChromium()]);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  stack?.cleanup();
});

const app = () => stack.info.functions_url;

interface Seen {
  url: string;
  method: string;
  authorization: string | undefined;
  postData: string | null;
}

/** A signed-in browser session: its page, every request it made, and its bearer token. */
interface Session {
  page: Page;
  requests: Seen[];
  /** The access token the app sends (from its last API request). */
  bearer(): string;
}

/** Opens the dashboard in a fresh browser profile and signs in through the identity provider's page. */
async function signIn(
  role: "Reader" | "Contributor" | "Owner",
  name: string,
  options: { check?: boolean } = {},
): Promise<Session> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  contexts.push(context);
  const page = await context.newPage();
  page.setDefaultTimeout(20_000);
  const requests: Seen[] = [];
  page.on("request", (r) =>
    requests.push({
      url: r.url(),
      method: r.method(),
      authorization: r.headers().authorization,
      postData: r.postData(),
    }),
  );
  await page.goto(`${app()}/`);
  await page.getByRole("heading", { name: "Sign in to blastplane" }).waitFor();
  if (options.check) await checkPage(page, "sign-in");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/oauth2\/v2\.0\/authorize/);
  if (options.check) await checkPage(page, "identity-provider");
  await page.getByLabel("Your name").fill(name);
  await page.getByRole("radio", { name: new RegExp(`^${role}`) }).check();
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".who .badge-role", { hasText: role }).waitFor();
  return {
    page,
    requests,
    bearer() {
      const header =
        requests.findLast((r) => r.url.startsWith(`${app()}/api/`) && r.authorization)?.authorization ?? "";
      return header.replace(/^Bearer /, "");
    },
  };
}

/** The job API's current token, as an Owner reveals it through the dashboard API. */
async function jobApiToken(): Promise<string> {
  const owner = await mintToken(stack, "Owner");
  const res = await fetch(`${app()}/api/settings/api-token/reveal`, {
    method: "POST",
    headers: { Authorization: `Bearer ${owner}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { api_token: string }).api_token;
}

/** Starts a search on the New search page with the example query and the chosen profile; resolves on the job page. */
async function submitExample(page: Page, profile: "Standard" | "Sharded", title: string): Promise<string> {
  await page.getByRole("link", { name: "New search" }).first().click();
  await page.getByRole("heading", { name: "New search" }).waitFor();
  await page.getByRole("button", { name: "Use the example query" }).click();
  await page.getByLabel("Title (optional)").fill(title);
  await page.getByRole("radio", { name: new RegExp(`^${profile}`) }).check();
  await page.getByRole("button", { name: "Submit search" }).click();
  await page.waitForURL(/\/blast\/jobs\/[0-9a-f-]{36}$/);
  return new URL(page.url()).pathname.split("/").pop() ?? "";
}

describe("the dashboard web app in Chromium", () => {
  let contributor: Session;

  it("B-183 B-184 B-185 a researcher signs in with the authorization code flow and PKCE, and sees who they are and their role", async () => {
    contributor = await signIn("Contributor", "E2E Contributor", { check: true });
    const { page, requests } = contributor;
    const authorize = new URL(
      requests.find((r) => r.url.includes("/oauth2/v2.0/authorize") && r.method === "GET")?.url ?? "http://x",
    );
    expect(authorize.searchParams.get("response_type")).toBe("code");
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("scope")?.split(" ")).toContain("api://blastplane-local-api/user_impersonation");
    // The token request proves possession of the verifier behind the challenge sent to /authorize.
    const tokenRequest = new URLSearchParams(
      requests.find((r) => r.method === "POST" && new URL(r.url).pathname.endsWith("/oauth2/v2.0/token"))?.postData ??
        "",
    );
    expect(tokenRequest.get("grant_type")).toBe("authorization_code");
    const verifier = tokenRequest.get("code_verifier") ?? "";
    expect(createHash("sha256").update(verifier).digest("base64url")).toBe(
      authorize.searchParams.get("code_challenge"),
    );
    // The API answers the app's bearer token for this caller.
    const me = await fetch(`${app()}/api/me`, { headers: { Authorization: `Bearer ${contributor.bearer()}` } });
    expect(((await me.json()) as { caller: { name: string; roles: string[] } }).caller).toMatchObject({
      name: "E2E Contributor",
      roles: ["Contributor"],
    });
    expect(await page.locator(".who").textContent()).toContain("E2E Contributor");
    await page.getByRole("heading", { name: "Jobs" }).waitFor();
    await checkPage(page, "jobs-empty");
  }, 60_000);

  it("B-002 the workspace is saved from the page, is still there after a reload, and a save over another change says it changed elsewhere", async () => {
    const { page } = contributor;
    await page.getByRole("link", { name: "Workspace" }).click();
    await page.getByText("No workspace is saved yet").waitFor();
    const values: Record<string, string> = {
      "Subscription id": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
      "Resource group": "rg-blast-e2e",
      Region: "westeurope",
      "Storage account": "Blast Store",
      "Container registry": "blastacr01",
      "Cluster name": "aks-blast",
      "Node size": "Standard_D4s_v5",
      "Node count": "2",
    };
    for (const [label, value] of Object.entries(values)) await page.getByLabel(label, { exact: true }).fill(value);
    await page.getByRole("button", { name: "Save workspace" }).click();
    // The backend's own schema refuses the storage account name in the page, next to the field.
    await page.getByText("must be 3-24 lowercase letters or digits").waitFor();
    expect(await page.getByLabel("Storage account").getAttribute("aria-invalid")).toBe("true");
    await checkPage(page, "workspace-invalid");
    await page.getByLabel("Storage account").fill("blaststore01");
    await page.getByRole("button", { name: "Save workspace" }).click();
    await page
      .getByRole("status")
      .filter({ hasText: /^Saved/ })
      .waitFor();

    await page.reload();
    await page.getByLabel("Resource group").waitFor();
    await page.waitForFunction(
      () => (document.getElementById("ws-resource_group") as HTMLInputElement | null)?.value === "rg-blast-e2e",
    );
    expect(await page.getByLabel("Storage account").inputValue()).toBe("blaststore01");

    // Someone else saves meanwhile.
    const other = await mintToken(stack, "Owner", { name: "Someone Else" });
    const current = await fetch(`${app()}/api/workspace`, { headers: { Authorization: `Bearer ${other}` } });
    const etag = current.headers.get("etag") ?? "";
    const saved = await fetch(`${app()}/api/workspace`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${other}`, "Content-Type": "application/json", "If-Match": etag },
      body: JSON.stringify({ ...((await current.json()) as { workspace: object }).workspace, node_count: 5 }),
    });
    expect(saved.status).toBe(200);
    await page.getByLabel("Node count").fill("3");
    await page.getByRole("button", { name: "Save workspace" }).click();
    await page.getByRole("alert").filter({ hasText: "Changed elsewhere" }).waitFor();
    await checkPage(page, "workspace-conflict");
    await page.getByRole("button", { name: "Reload" }).click();
    await page.waitForFunction(
      () => (document.getElementById("ws-node_count") as HTMLInputElement | null)?.value === "5",
    );
    await page.getByText("Last saved").filter({ hasText: "Someone Else" }).waitFor();
  }, 60_000);

  it("the page checks the query with the server's FASTA rules before sending it, and shows the server's 422 next to the field it names", async () => {
    const { page, requests } = contributor;
    await page.getByRole("link", { name: "New search" }).first().click();
    await page.getByLabel("Query (FASTA)").fill(">q1 first\nACGTACGTAC1GT\n");
    const before = requests.filter((r) => r.method === "POST" && r.url.endsWith("/api/blast/jobs")).length;
    await page.getByRole("button", { name: "Submit search" }).click();
    await page
      .getByText(
        "record 1 ('>q1 first') has an invalid character '1' at line 2, column 11: digits are not allowed in a sequence",
      )
      .waitFor();
    expect(await page.getByLabel("Query (FASTA)").getAttribute("aria-invalid")).toBe("true");
    expect(requests.filter((r) => r.method === "POST" && r.url.endsWith("/api/blast/jobs")).length).toBe(before);
    await checkPage(page, "new-search-invalid");

    // A page whose rules were older than the server's: the server's own 422 lands on the field.
    await page.route("**/api/blast/jobs", async (route) => {
      const body = JSON.parse(route.request().postData() ?? "{}") as Record<string, unknown>;
      await route.continue({ postData: JSON.stringify({ ...body, query_fasta: ">q2\nACGT>ACGT\n" }) });
    });
    await page.getByLabel("Query (FASTA)").fill(">q1\nACGTACGTAC\n");
    await page.getByRole("button", { name: "Submit search" }).click();
    await page.getByText("The service refused some fields").waitFor();
    await page
      .locator("#query_fasta-error", { hasText: "a header line must start with '>' in the first column" })
      .waitFor();
    await page.unroute("**/api/blast/jobs");
  }, 60_000);

  it("issue 23: every refusal the submit API answers is shown on the New search page, next to its field or at the top", async () => {
    const { page } = contributor;
    // A protein database with no partitions, as `npx blastplane db add` makes by default.
    const fasta = path.join(stack.dataDir, "noparts.faa");
    await writeFile(fasta, ">p1 synthetic\nMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQ\n");
    await promisify(execFile)(
      process.execPath,
      [path.join(ROOT, "bin/blastplane.mjs"), "db", "add", "prot_noparts", fasta, "--type", "prot"],
      { env: { ...process.env, BLASTPLANE_DATA_DIR: stack.dataDir } },
    );
    await page.getByRole("link", { name: "Jobs" }).first().click();
    await page.getByRole("link", { name: "New search" }).first().click();
    await page.getByRole("heading", { name: "New search" }).waitFor();

    // As the researcher met it: blastp, sharded, on a protein database with no partitions.
    await page.locator("#program").selectOption("blastp");
    await page.locator("#db option[value='prot_noparts']").waitFor({ state: "attached" });
    await page.locator("#db").selectOption("prot_noparts");
    await page.getByLabel("Query (FASTA)").fill(">q\nMKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ\n");
    await page.getByRole("radio", { name: /^Sharded/ }).check();
    await page.getByRole("button", { name: "Submit search" }).click();
    await page
      .locator("#execution_profile-error", { hasText: "database 'prot_noparts' has no prepared partitions" })
      .waitFor();
    await page.getByText("The service refused some fields: see the messages next to the fields they name.").waitFor();
    await checkPage(page, "new-search-refused-profile");

    // Each other refusal the API can answer (the page's own checks would stop most of them first,
    // so the request is changed on its way out): its every message appears where the page puts it.
    await page.locator("#program").selectOption("blastn");
    await page.getByRole("button", { name: "Use the example query" }).click();
    await page.getByRole("radio", { name: /^Standard/ }).check();
    const refusals: [string, Record<string, unknown>, string][] = [
      ["unknown database", { db: "no_such_db" }, "#db-error"],
      ["unknown program", { program: "blastz" }, "#program-error"],
      ["title too long", { title: "t".repeat(201) }, "#title-error"],
      ["unknown priority", { priority: "asap" }, "#priority-error"],
      ["unknown profile", { execution_profile: "turbo" }, "#execution_profile-error"],
      ["bad e-value", { options: { evalue: -1 } }, "#opt-evalue-error"],
      ["bad option under More options", { options: { word_size: 2 } }, "#opt-word_size-error"],
      ["option the program lacks", { options: { matrix: "BLOSUM62" } }, "#submit-refusals"],
      ["options not an object", { options: "fast" }, "#submit-refusals"],
      ["bad idempotency key", { idempotency_key: "has space" }, "#submit-refusals"],
      ["unknown field", { surprise: true }, "#submit-refusals"],
    ];
    for (const [name, change, where] of refusals) {
      await page.route("**/api/blast/jobs", async (route) => {
        const body = JSON.parse(route.request().postData() ?? "{}") as Record<string, unknown>;
        await route.continue({ postData: JSON.stringify({ ...body, ...change }) });
      });
      const answered = page.waitForResponse(
        (r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/api/blast/jobs",
      );
      await page.getByRole("button", { name: "Submit search" }).click();
      const response = await answered;
      expect(response.status(), name).toBe(422);
      const { detail } = (await response.json()) as { detail: { loc: unknown[]; msg: string }[] };
      expect(detail.length, name).toBeGreaterThan(0);
      for (const issue of detail) {
        const shown = page.locator(where, { hasText: issue.msg });
        await shown.waitFor({ timeout: 5000 }).catch(() => {
          throw new Error(`${name}: ${JSON.stringify(issue)} is not shown in ${where}`);
        });
        expect(await shown.isVisible(), name).toBe(true);
      }
      if (name === "unknown field") await checkPage(page, "new-search-refused-top");
      await page.unroute("**/api/blast/jobs");
    }
  }, 120_000);

  it("a search refused by the memory pre-flight shows the message and its three remedies", async () => {
    const { page } = contributor;
    await submitExample(page, "Standard", "Standard profile, too big");
    const alert = page.getByRole("alert").filter({ hasText: "memory pre-flight failed" });
    await alert.waitFor({ timeout: 60_000 });
    const text = (await alert.textContent()) ?? "";
    expect(text).toContain("exceed the machine type's memory");
    expect(text).toContain("sharded");
    expect(text).toContain("larger machine type");
    expect(text).toContain("smaller database");
    expect(await alert.getByRole("link", { name: "Submit the search again" }).getAttribute("href")).toBe("/blast/new");
    await checkPage(page, "job-preflight-failed");
  }, 90_000);

  let jobUuid = "";

  it("B-007 B-036 B-008 B-022 B-023 B-024 a Contributor submits the demo search, watches it complete, reads the graphic and the hit table, and downloads XML identical to the job API's", async () => {
    const { page, requests } = contributor;
    await page.getByRole("link", { name: "New search" }).first().click();
    await page.getByRole("heading", { name: "New search" }).waitFor();
    await page.getByRole("button", { name: "Use the example query" }).click();
    await page.getByText("2 sequences, 2,702 letters.").waitFor();
    await checkPage(page, "new-search");
    jobUuid = await submitExample(page, "Sharded", "Demo search");
    await page.getByRole("heading", { name: "Demo search" }).waitFor();
    expect(await page.getByText(`Dashboard job ${jobUuid}`).count()).toBe(1);
    await page.getByText("The search has completed.").waitFor({ timeout: 90_000 });
    expect(await page.locator(".timeline li").last().textContent()).toContain("Completed");
    await page.getByText("2 of 2 done, 0 running, 0 failed").waitFor();

    // The results, read a page at a time (issue 23): the first query's graphic, one bar per HSP
    // of its top 50 hits, and its hit table with accession, title and scores.
    const graphic = page.getByRole("img", { name: /Distribution of the top 50 hits on the query gb\|U20776\.2\|/ });
    await graphic.waitFor();
    expect(await graphic.locator("rect[fill]").count()).toBeGreaterThanOrEqual(50);
    // The hit table: the query finds itself first, at 100% identity.
    const table = page.getByRole("table", { name: /Hits of gb\|U20776\.2\|/ });
    const firstRow = () => table.locator("tbody tr").first().locator("td");
    await table.locator("tbody tr").first().waitFor();
    expect(await firstRow().nth(3).textContent()).toMatch(/^U20776/);
    expect(await firstRow().nth(8).textContent()).toBe("100%");
    await checkPage(page, "job-completed");
    const range = (await page.getByText(/^Hits 1–50 of /).textContent()) ?? "";
    const total = Number(/of ([\d,]+)/.exec(range)?.[1]?.replace(/,/g, ""));
    expect(total).toBeGreaterThan(50);
    await page.getByRole("navigation", { name: "Hit pages" }).getByRole("button", { name: "Next" }).click();
    await page.getByText(/^Hits 51–100 of /).waitFor();
    expect(await firstRow().nth(1).textContent()).toBe("51");
    // The second query has its own graphic and hits.
    await page.getByRole("button", { name: "Next query" }).click();
    await page.getByRole("heading", { name: /^Query 2 of 2: lcl\|AB039769\.1 Thermotoga thermarum/ }).waitFor();
    await page.getByRole("img", { name: /on the query lcl\|AB039769\.1/ }).waitFor();
    expect(
      await page
        .getByRole("table", { name: /Hits of lcl\|AB039769\.1/ })
        .locator("tbody tr")
        .first()
        .locator("td")
        .nth(3)
        .textContent(),
    ).toMatch(/AB039769/);

    // Download the XML through the dashboard, and compare it with the job API's bytes.
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download BLAST XML" }).click(),
    ]);
    const downloaded = await readFile((await download.path()) ?? "");
    const job = (await (
      await fetch(`${app()}/api/blast/jobs/${jobUuid}`, {
        headers: { Authorization: `Bearer ${contributor.bearer()}` },
      })
    ).json()) as { openapi_job_id: string };
    const direct = await fetch(`${stack.info.jobapi_url}/v1/jobs/${job.openapi_job_id}/results?content=xml`, {
      headers: { "X-SVC-API-Token": await jobApiToken() },
    });
    expect(direct.status).toBe(200);
    const expected = Buffer.from(await direct.arrayBuffer());
    expect(expected.subarray(0, 60).toString()).toContain("<?xml");
    expect(downloaded.equals(expected)).toBe(true);

    // The browser spoke only to the app's origin and the identity provider: never to storage.
    const origins = new Set(requests.map((r) => new URL(r.url).origin));
    expect([...origins].sort()).toEqual([new URL(app()).origin, new URL(stack.info.idp_url).origin].sort());
    for (const storage of [stack.info.blob_endpoint, stack.info.table_endpoint]) {
      expect(requests.some((r) => r.url.startsWith(new URL(storage).origin))).toBe(false);
    }
  }, 150_000);

  it("issue 23 B-008 B-024 the results page reads a 12-query result a page at a time, never the whole XML: the second page of queries, a bar that goes to its hit, the alignments, FASTA of chosen hits; a result stored without an index says to download the XML", async () => {
    const { page, requests } = contributor;
    const bearer = contributor.bearer();
    const call = (path: string, init: RequestInit = {}) =>
      fetch(`${app()}/api${path}`, {
        ...init,
        headers: { Authorization: `Bearer ${bearer}`, "Content-Type": "application/json", ...init.headers },
      });
    // Twelve queries: the example's two sequences, six times each under their own names.
    const records = EXAMPLE_QUERY.trim()
      .split(/\n(?=>)/)
      .map((r) => r.split("\n").slice(1).join("\n"));
    const twelve = Array.from(
      { length: 12 },
      (_, i) => `>q${String(i + 1).padStart(2, "0")} copy of example ${(i % 2) + 1}\n${records[i % 2]}`,
    ).join("\n");
    const submit = async (title: string, query: string) => {
      const res = await call("/blast/jobs", {
        method: "POST",
        body: JSON.stringify({
          program: "blastn",
          db: "16s_rrna_demo",
          query_fasta: query,
          execution_profile: "sharded",
          title,
          // Sixty hits a query (two pages of the table) keep the result small.
          options: { max_target_seqs: 60 },
        }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { job_id: string }).job_id;
    };
    const [paged, old] = await Promise.all([
      submit("Twelve queries", twelve),
      submit("Stored before the index", `${EXAMPLE_QUERY.trim().split(/\n(?=>)/)[0]}\n`),
    ]);
    const completed = async (uuid: string) => {
      for (;;) {
        const job = (await (await call(`/blast/jobs/${uuid}`)).json()) as { status: string; openapi_job_id: string };
        expect(["failed", "cancelled"]).not.toContain(job.status);
        if (job.status === "completed") return job;
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    };
    const [, oldJob] = await Promise.all([completed(paged), completed(old)]);

    // The job page of the 12-query search: the size of the result, then the queries ten at a time.
    const before = requests.length;
    await page.goto(`${app()}/blast/jobs/${paged}`);
    await page.getByText(/^12 queries against 16s_rrna_demo \(blastn\); the whole BLAST XML is [\d.]+ [KM]B/).waitFor();
    const queryNav = page.getByRole("navigation", { name: "Queries" });
    await queryNav.getByText("Queries 1–10 of 12").waitFor();
    expect(await queryNav.getByRole("listitem").count()).toBe(10);
    await queryNav.getByRole("navigation", { name: "Query list pages" }).getByRole("button", { name: "Next" }).click();
    await queryNav.getByText("Queries 11–12 of 12").waitFor();
    // The range line can render before the list does: wait for the second page's first query.
    await queryNav.getByRole("button", { name: "q11 copy of example 1" }).waitFor();
    expect(await queryNav.getByRole("listitem").allInnerTexts()).toEqual([
      expect.stringMatching(/^q11 copy of example 1\s+1,231 letters, 60 hits, best e-value 0\.0$/),
      expect.stringMatching(/^q12 copy of example 2\s+1,471 letters, 60 hits, best e-value 0\.0$/),
    ]);
    await queryNav.getByRole("button", { name: "q12 copy of example 2" }).click();
    await page.getByRole("heading", { name: "Query 12 of 12: q12 copy of example 2" }).waitFor();
    const table = page.getByRole("table", { name: "Hits of q12 copy of example 2" });
    await table.locator("tbody tr").first().waitFor();

    // A bar of the graphic goes to its hit in the table.
    const graphic = page.getByRole("img", {
      name: /Distribution of the top \d+ hits on the query q12 copy of example 2/,
    });
    await graphic.locator('g.hit-row[data-hit="30"] rect').first().click();
    const row30 = page.locator("#hit-12-30");
    expect(await row30.getAttribute("class")).toBe("highlight");
    // The row takes focus in an effect after the render that marks it: wait for it, not a tick.
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("hit-12-30");
    expect(
      await row30.evaluate((el) => {
        const r = el.getBoundingClientRect();
        return r.top >= 0 && r.bottom <= window.innerHeight;
      }),
    ).toBe(true);

    // The first hit's alignments: the query, match line and subject in blocks of 60, with coordinates.
    const hit1 = (await (await call(`/blast/jobs/${paged}/results/queries/12/hits/1`)).json()) as {
      hit: { accession: string; title: string };
      hsp_list: { qseq: string; hseq: string; hit_from: number; hit_to: number; query_from: number }[];
    };
    const hsp = hit1.hsp_list[0];
    if (!hsp) throw new Error("hit 1 has no HSP");
    await table.locator("tbody tr").first().getByRole("button").click();
    const alignment = page.getByRole("region", { name: /^Alignments of hit 1: / });
    await alignment.waitFor();
    await alignment.getByText("Plus/Plus").waitFor();
    const text = (await alignment.locator("pre").first().textContent()) ?? "";
    expect(text.split("\n")[0]).toBe(`Query  ${hsp.query_from}  ${hsp.qseq.slice(0, 60)}  ${hsp.query_from + 59}`);
    expect(text).toContain(`Sbjct  ${hsp.hit_from}  ${hsp.hseq.slice(0, 60)}`);
    await checkPage(page, "job-alignments");

    // FASTA of the aligned regions of two chosen hits.
    await table.getByRole("checkbox", { name: /^Select hit 1,/ }).check();
    await table.getByRole("checkbox", { name: /^Select hit 2,/ }).check();
    const [fasta] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: /^Download FASTA of the selected hits' aligned regions \(2\)/ }).click(),
    ]);
    const records2 = (await readFile((await fasta.path()) ?? "", "utf8")).split(/\n(?=>)/);
    expect(records2.length).toBeGreaterThanOrEqual(2);
    expect(records2[0]?.split("\n")[0]).toBe(`>${hit1.hit.accession}:${hsp.hit_from}-${hsp.hit_to} ${hit1.hit.title}`);
    expect(records2[0]?.split("\n").slice(1).join("")).toBe(hsp.hseq.replace(/-/g, ""));

    // What the page asked for: pages, never the whole result.
    const asked = requests.slice(before).map((r) => r.url);
    expect(asked.some((u) => u.includes(`/results/queries?offset=10&limit=10`))).toBe(true);
    expect(asked.some((u) => u.includes(`/results/queries/12/hits?offset=0&limit=50`))).toBe(true);
    expect(asked.filter((u) => /[?&]content=/.test(u))).toEqual([]);

    // A result stored before result pages existed (its index removed, as on an old job): the page
    // says so and offers the XML.
    const blobs = new ContainerClient(
      `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};BlobEndpoint=${stack.info.blob_endpoint};`,
      "jobapi-artifacts",
    );
    await blobs.deleteBlob(`${oldJob.openapi_job_id}/merged_index.json.gz`);
    await page.goto(`${app()}/blast/jobs/${old}`);
    await page.getByText(/This result cannot be shown page by page: .*download the XML instead/).waitFor();
    const [xml] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download the BLAST XML" }).click(),
    ]);
    expect((await readFile((await xml.path()) ?? "", "utf8")).slice(0, 60)).toContain("<?xml");
  }, 180_000);

  it("B-022 no API answer the app reads carries a storage URL or a SAS", async () => {
    const bearer = contributor.bearer();
    for (const path of [
      "/api/blast/jobs",
      `/api/blast/jobs/${jobUuid}`,
      "/api/databases",
      "/api/workspace",
      "/api/settings/api-token",
    ]) {
      const res = await fetch(`${app()}${path}`, { headers: { Authorization: `Bearer ${bearer}` } });
      const text = `${JSON.stringify([...res.headers])}${await res.text()}`;
      expect(res.status, path).toBe(200);
      expect(text, path).not.toMatch(/[?&](sig|se|sv)=/);
      expect(text, path).not.toContain(new URL(stack.info.blob_endpoint).host);
    }
  });

  it("the jobs list updates live: a search submitted elsewhere appears and completes without a reload", async () => {
    const { page } = contributor;
    // The page's own clock, so the test need not sit through the idle poll (10 s, every job
    // finished): it runs at its real pace and is moved on once, as after a laptop's sleep.
    await page.clock.install();
    await page.getByRole("link", { name: "Jobs", exact: true }).click();
    await page.getByRole("link", { name: "Demo search" }).waitFor();
    let navigations = 0;
    page.on("framenavigated", () => {
      navigations += 1;
    });
    const res = await fetch(`${app()}/api/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${contributor.bearer()}`, "Content-Type": "application/json" },
      body: JSON.stringify({
        program: "blastn",
        db: "16s_rrna_demo",
        query_fasta: EXAMPLE_QUERY,
        execution_profile: "sharded",
        title: "Submitted elsewhere",
      }),
    });
    expect(res.status).toBe(200);
    const row = page.getByRole("row").filter({ has: page.getByRole("link", { name: "Submitted elsewhere" }) });
    // The idle poll falls due (no reload, no click); while the job moves, the page polls every 2 s.
    await page.clock.fastForward(10_000);
    await row.waitFor({ timeout: 30_000 });
    await row.locator(".badge", { hasText: "completed" }).waitFor({ timeout: 60_000 });
    expect(navigations).toBe(0);
    await checkPage(page, "jobs");
  }, 120_000);

  it("B-217 a Reader reads jobs and results but cannot submit: the page offers no submit, and the backend refuses with 403; an expired session signs in again; sign-out returns to the signed-out page", async () => {
    const reader = await signIn("Reader", "E2E Reader");
    const { page } = reader;
    await page.getByRole("link", { name: "Demo search" }).waitFor();
    expect(await page.getByRole("link", { name: "New search" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: /^Cancel/ }).count()).toBe(0);
    await page.goto(`${app()}/blast/new`);
    await page.getByText("cannot submit searches").waitFor();
    expect(await page.getByRole("button", { name: "Submit search" }).count()).toBe(0);
    await checkPage(page, "new-search-reader");
    await page.goto(`${app()}/blast/jobs/${jobUuid}`);
    await page
      .getByRole("table", { name: /Hits of/ })
      .locator("tbody tr")
      .first()
      .waitFor();

    const refused = await fetch(`${app()}/api/blast/jobs`, {
      method: "POST",
      headers: { Authorization: `Bearer ${reader.bearer()}`, "Content-Type": "application/json" },
      body: JSON.stringify({ program: "blastn", db: "16s_rrna_demo", query_fasta: EXAMPLE_QUERY }),
    });
    expect(refused.status).toBe(403);
    const body = (await refused.json()) as { detail: string; request_id: string };
    expect(body.detail).toMatch(/Contributor/);
    expect(body.request_id).toBe(refused.headers.get("x-request-id"));
    await page.getByRole("link", { name: "API token" }).click();
    await page.getByText("Only an Owner can reveal, copy or regenerate the token.").waitFor();
    expect(await page.getByRole("button", { name: "Reveal token" }).count()).toBe(0);

    // An expired access token (MSAL's session-storage cache entry aged past its expiry): the silent
    // renewal comes back login_required, and the app sends the user through sign-in again.
    await page.evaluate(() => {
      for (const key of Object.keys(sessionStorage).filter((k) => k.includes("|accesstoken|"))) {
        const entry = JSON.parse(sessionStorage.getItem(key) ?? "{}") as Record<string, string>;
        const past = String(Math.floor(Date.now() / 1000) - 60);
        sessionStorage.setItem(key, JSON.stringify({ ...entry, expiresOn: past, extendedExpiresOn: past }));
      }
    });
    const before = reader.requests.length;
    await page.getByRole("link", { name: "Jobs", exact: true }).click();
    await page.waitForURL(/\/oauth2\/v2\.0\/authorize/);
    // The renewal frame asked without prompting and came back to the app (the CSP admits it),
    // rather than MSAL waiting out its frame timeout.
    const after = reader.requests.slice(before);
    const silent = after.findIndex((r) => new URL(r.url).searchParams.get("prompt") === "none");
    expect(silent).toBeGreaterThanOrEqual(0);
    expect(after.slice(silent + 1).some((r) => r.url === `${app()}/`)).toBe(true);
    await page.getByRole("radio", { name: /^Reader/ }).check();
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Jobs" }).waitFor();

    // Signing out goes through the provider's logout and back to the signed-out page.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to blastplane" }).waitFor();
    expect(reader.requests.some((r) => new URL(r.url).pathname.endsWith("/oauth2/v2.0/logout"))).toBe(true);
  }, 60_000);

  it("B-203 B-204 an Owner reveals and copies the API token, and regenerating explains the grace period first", async () => {
    const owner = await signIn("Owner", "E2E Owner");
    const { page } = owner;
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: app() });
    await page.getByRole("link", { name: "API token" }).click();
    await page.getByRole("button", { name: "Reveal token" }).click();
    const field = page.getByLabel("Token", { exact: true });
    await field.waitFor();
    const shown = await field.inputValue();
    expect(shown).toBe(await jobApiToken());
    expect(shown).toMatch(/^bpt_/);
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByText("Copied to the clipboard.").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(shown);
    await page.getByRole("button", { name: "Hide" }).click();
    await checkPage(page, "api-token-owner");

    await page.getByRole("button", { name: "Regenerate…" }).click();
    const dialog = page.getByRole("dialog", { name: "Regenerate the API token?" });
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain("keeps working for a grace period");
    await expectAccessible(page, "regenerate dialog");
    await dialog.getByRole("button", { name: "Regenerate token" }).click();
    await page.getByText(/The previous token keeps working until/).waitFor();
    const fresh = await page.getByLabel("Token", { exact: true }).inputValue();
    expect(fresh).not.toBe(shown);
    expect(fresh).toBe(await jobApiToken());
    const accepted = await fetch(`${stack.info.jobapi_url}/v1/databases`, { headers: { "X-SVC-API-Token": fresh } });
    expect(accepted.status).toBe(200);
  }, 60_000);

  it("B-005 B-006 the databases page lists the demo database, warms it and follows the operation to its end; prepare without a source says why", async () => {
    const { page } = contributor;
    await page.getByRole("link", { name: "Databases" }).click();
    const row = page.getByRole("row", { name: /16s_rrna_demo/ });
    await row.waitFor();
    const cells = await row.locator("td").allInnerTexts();
    expect(cells).toEqual(expect.arrayContaining(["nucleotide", "480", "2"]));
    await row.getByRole("button", { name: "Warm up 16s_rrna_demo" }).click();
    const operation = page
      .getByRole("list", { name: "Operations" })
      .getByRole("listitem")
      .filter({ hasText: "Warming up" });
    await operation.locator(".badge", { hasText: "succeeded" }).waitFor({ timeout: 60_000 });
    await row.locator(".badge", { hasText: "warm" }).waitFor();
    // Without DATABASE_SOURCE_URL, Prepare is offered disabled, with what it needs (issue 23, item 5).
    await page.getByRole("note").filter({ hasText: "DATABASE_SOURCE_URL" }).waitFor();
    expect(await row.getByRole("button", { name: "Prepare 16s_rrna_demo" }).isDisabled()).toBe(true);
    await checkPage(page, "databases");
  }, 90_000);

  it("issue 23 B-023 a Contributor adds a database by uploading a FASTA, confirms its detected type, follows the build and searches it; a protein query under blastn is pointed to blastp or tblastn", async () => {
    const { page, requests } = contributor;
    const fasta = path.join(stack.dataDir, "my16s.fasta");
    await writeFile(fasta, demoQueries(10, 1500, 100));
    await page.getByRole("link", { name: "Databases" }).click();
    await page.getByLabel("FASTA file", { exact: true }).setInputFiles(fasta);
    await page.locator("#upload-summary", { hasText: "10 sequences" }).waitFor();
    expect(await page.locator("#upload-summary").textContent()).toContain("The letters look like nucleotide.");
    expect(await page.getByLabel("Database name", { exact: true }).inputValue()).toBe("my16s");
    expect(
      await page.getByRole("radio", { name: /^Nucleotide — detected from the sequence letters/ }).isChecked(),
    ).toBe(true);
    // The demo node leaves 180,000 bytes to a search: ten 1,500-base sequences fit whole.
    expect(await page.getByLabel("Partitions", { exact: true }).inputValue()).toBe("0");
    expect(await page.locator("#upload-partitions-hint").textContent()).toContain("no partitions needed");
    await checkPage(page, "databases-upload");
    await page.getByRole("button", { name: "Add nucleotide database" }).click();
    const adding = page.getByRole("list", { name: "Operations" }).getByRole("listitem").filter({ hasText: "Adding" });
    await adding.locator(".badge", { hasText: "succeeded" }).waitFor({ timeout: 60_000 });
    // The build's steps, each with its outcome (issue 23): no partitions were asked for.
    expect(
      await adding.getByRole("list", { name: "Steps adding my16s" }).getByRole("listitem").allInnerTexts(),
    ).toEqual([
      expect.stringMatching(/^Upload checked: succeeded \(.+\)$/),
      expect.stringMatching(/^makeblastdb: succeeded \(.+\)$/),
      "Partitions: skipped (not partitioned)",
      expect.stringMatching(/^Published: succeeded \(.+\)$/),
    ]);
    await page.getByRole("row", { name: /my16s/ }).waitFor();
    // The file went to the app's own API, never to storage.
    const sent = requests.find((r) => r.method === "POST" && r.url.includes("/api/databases/uploads"));
    expect(new URL(sent?.url ?? "http://x").origin).toBe(new URL(app()).origin);
    expect(requests.some((r) => r.url.startsWith(new URL(stack.info.blob_endpoint).origin))).toBe(false);

    // New search: the query's length next to the database's letters and sequences, and a protein
    // under blastn gets the programs that fit.
    await page.getByRole("link", { name: "New search" }).first().click();
    await page.locator("#program").selectOption("blastn");
    await page.locator("#db option[value='my16s']").waitFor({ state: "attached" });
    await page.locator("#db").selectOption("my16s");
    await page.getByLabel("Query (FASTA)").fill(">hba\nMVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF\n");
    const hint = page.locator("#query-program-hint");
    await hint
      .getByText("This query looks like protein — use blastp or tblastn; blastn expects a nucleotide query.")
      .waitFor();
    await checkPage(page, "new-search-protein-hint");
    await hint.getByRole("button", { name: "Use blastp" }).click();
    expect(await page.locator("#program").inputValue()).toBe("blastp");
    await hint.waitFor({ state: "detached" });

    await page.locator("#program").selectOption("blastn");
    await page.locator("#db").selectOption("my16s");
    await page.getByLabel("Query (FASTA)").fill(demoQueries(1, 1500, 100));
    await page.getByText(/1 sequence, 1,500 letters\. Database my16s: 10 sequences, [\d,]+ letters\./).waitFor();
    await page.getByLabel("Title (optional)").fill("Search of an uploaded database");
    await page.getByRole("button", { name: "Submit search" }).click();
    await page.waitForURL(/\/blast\/jobs\/[0-9a-f-]{36}$/);
    await page.getByText("The search has completed.").waitFor({ timeout: 90_000 });

    // With no database of the program's type, New search links to the Databases page.
    await page.route("**/api/databases", (route) =>
      route.fulfill({ json: { databases: [], meta: { request_id: "test" } } }),
    );
    await page.getByRole("link", { name: "New search" }).first().click();
    const link = page.getByRole("link", { name: "Add a nucleotide database" });
    await link.waitFor();
    await page.unroute("**/api/databases");
    await link.click();
    await page.getByRole("heading", { name: "Add a database from a FASTA file" }).waitFor();
  }, 150_000);

  it("diagnostics: the queue diagnostics and the no-op round trip work, signed out too", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const page = await context.newPage();
    await page.goto(`${app()}/diagnostics`);
    await page.getByRole("heading", { name: "Task queues" }).waitFor();
    expect(await page.getByText("(equal, as they must be)").count()).toBe(1);
    await page.getByLabel("Message").fill("ping from e2e");
    await page.getByRole("button", { name: "Run the round trip" }).click();
    await page.getByRole("status").filter({ hasText: "the message came back unchanged" }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole("status").locator(".badge").textContent()).toBe("SUCCESS");
    await checkPage(page, "diagnostics");
  }, 60_000);
});
