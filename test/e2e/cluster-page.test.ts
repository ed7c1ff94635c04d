import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEMO_DB, demoQueries } from "../support/jobapi-client.js";
import { eventually, mintToken, startStack, type TestStack } from "../support/local-stack.js";
import { LOCAL_ARM_WORLD } from "../../local/arm/stack-arm.js";
import { checkPage, launchChromium } from "./browser.js";

/*
 * The Cluster page as a person uses it, in real Chromium against the local stack with its local
 * Kubernetes API and local Resource Manager: the prerequisites checklist with each step's live
 * state; a deploy of an image nobody built (the local kubelet cannot pull it: the operation fails
 * with the pod's ImagePullBackOff, B-027's first half); then the whole path from the page —
 * provision the cluster (its pools become the local API's nodes), build the job API image (a
 * registry run), deploy the digest the build produced — each followed to its end (B-027's second
 * half); a Reader sees the checklist but no action.
 */
const ABSENT = `sha256:${"e".repeat(64)}`;

let stack: TestStack;
let browser: Browser;

beforeAll(async () => {
  [stack, browser] = await Promise.all([
    startStack({
      env: {
        BLASTPLANE_EXECUTOR: "kubernetes",
        BLASTPLANE_KUBE_NODES: "1",
        BLASTPLANE_LOCAL_ARM: "1",
        JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID: "22222222-2222-4222-8222-222222222222",
        JOBAPI_APP_SUBNET_CIDR: "10.1.0.0/24",
        JOBAPI_DEPLOY_KEY_VAULT_URL: "https://blastplane-kv.vault.azure.net/",
        // Long enough for the deployed job API to start and pass its readiness probe on a busy
        // machine; the failing deploy below waits it out.
        JOBAPI_ROLLOUT_TIMEOUT_SECONDS: "30",
        JOB_POLL_INTERVAL_SECONDS: "1",
      },
    }),
    launchChromium(),
  ]);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  stack?.cleanup();
});

async function signIn(role: "Reader" | "Contributor" | "Owner"): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(60_000);
  await page.goto(`${stack.info.functions_url}/`);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/oauth2\/v2\.0\/authorize/);
  await page.getByLabel("Your name").fill(`${role} person`);
  await page.getByRole("radio", { name: new RegExp(`^${role}`) }).check();
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".who .badge-role", { hasText: role }).waitFor();
  return page;
}

/** kubectl against the stack's local cluster, in the job API's namespace. */
const kubectl = async (...args: string[]) =>
  (
    await promisify(execFile)("kubectl", [
      "--kubeconfig",
      path.join(stack.dataDir, "kubeconfig"),
      "-n",
      "blastplane",
      ...args,
    ])
  ).stdout.trim();

const step = (page: Page, title: string) => page.locator(".checklist-step", { hasText: title });

describe("the Cluster page", { timeout: 240_000 }, () => {
  it("B-027 shows the prerequisites in order with live state, and a deploy of an absent image ends with the pod's ImagePullBackOff", async () => {
    const page = await signIn("Contributor");
    await page.getByRole("link", { name: "Cluster" }).click();
    const steps = page.getByRole("list", { name: "Prerequisites" }).locator("> li h2");
    await expect
      .poll(() => steps.allTextContents(), { timeout: 60_000 })
      .toEqual([
        expect.stringContaining("1. Workspace saved"),
        expect.stringContaining("2. Cluster running"),
        expect.stringContaining("3. Job API image present in the registry"),
        expect.stringContaining("4. Job API deployed"),
        expect.stringContaining("5. API token configured"),
        expect.stringContaining("6. BLAST database prepared and warm"),
      ]);
    await step(page, "Workspace saved").getByText("missing").waitFor();
    await step(page, "Cluster running").getByText("Save the workspace to plan the cluster.").waitFor();
    await step(page, "Cluster running").getByText("Save the workspace configuration first.").waitFor();
    await step(page, "Job API deployed").getByText("Not deployed yet.").waitFor();
    await checkPage(page, "cluster");

    // Deploying needs a saved workspace: the page says so.
    await page.getByLabel("Image digest").fill(ABSENT);
    await page.getByRole("button", { name: "Deploy the job API" }).click();
    await page.getByText(/save the workspace configuration before deploying/).waitFor();

    // The workspace, saved on its page from what the managed identity sees in the (local) Resource
    // Manager: each choice fills its field (the resource group its region too); the rest is typed.
    await step(page, "Workspace saved").getByRole("link", { name: "Workspace settings" }).click();
    const discovered = page.getByRole("region", { name: "Discovered in Azure" });
    const choose = async (list: string, name: string) => {
      const select = discovered.getByLabel(list, { exact: true });
      await select.locator("option", { hasText: name }).waitFor({ state: "attached" });
      await select.selectOption({ label: (await select.locator("option", { hasText: name }).textContent()) ?? "" });
    };
    await choose("Subscriptions", LOCAL_ARM_WORLD.subscriptionName);
    await choose("Resource groups", LOCAL_ARM_WORLD.resourceGroup);
    await choose("Storage accounts", LOCAL_ARM_WORLD.storageAccount);
    await choose("Container registries", LOCAL_ARM_WORLD.registry);
    expect(await discovered.getByLabel("Clusters", { exact: true }).isDisabled()).toBe(true);
    await checkPage(page, "workspace-discovered");
    const form = {
      "Subscription id": LOCAL_ARM_WORLD.subscriptionId,
      "Resource group": LOCAL_ARM_WORLD.resourceGroup,
      Region: LOCAL_ARM_WORLD.location,
      "Storage account": LOCAL_ARM_WORLD.storageAccount,
      "Container registry": LOCAL_ARM_WORLD.registry,
    };
    for (const [label, value] of Object.entries(form))
      expect(await page.getByLabel(label, { exact: true }).inputValue()).toBe(value);
    await page.getByLabel("Cluster name", { exact: true }).fill("blastplane-aks");
    await page.getByLabel("Node size", { exact: true }).fill("Standard_E8s_v5");
    await page.getByLabel("Node count", { exact: true }).fill("1");
    await page.getByRole("button", { name: "Save workspace" }).click();
    await page
      .getByRole("status")
      .filter({ hasText: /^Saved/ })
      .waitFor();
    await page.getByRole("link", { name: "Cluster" }).click();
    await step(page, "Workspace saved").getByText("done").waitFor();
    await page.getByLabel("Image digest").fill(ABSENT);
    await page.getByRole("button", { name: "Deploy the job API" }).click();
    // While that rollout runs out its 30 s, the cluster is provisioned and the image built from this
    // page (neither waits for a deploy); the next test follows both to their end.
    const cluster = step(page, "Cluster running");
    // The pools the backend plans: the system pool, and the BLAST pool the workspace names.
    await expect
      .poll(() => cluster.getByRole("list", { name: "Node pools" }).textContent(), { timeout: 60_000 })
      .toMatch(/System pool: 1 × Standard_D2s_v5.*BLAST pool: 1 × Standard_E8s_v5 \(64 GiB, 8 vCPUs each\)/);
    await cluster.getByText("The cluster does not exist yet.").waitFor();
    await cluster.getByText("missing").waitFor();
    await cluster.getByRole("button", { name: "Provision the cluster" }).click();
    await page.getByLabel("Cluster operation").waitFor();
    await step(page, "Job API image present in the registry")
      .getByRole("button", { name: "Build the job API image" })
      .click();
    await page.getByLabel("Build operation").waitFor();
    const operation = page.getByLabel("Deploy operation");
    await operation.getByText("failed").waitFor({ timeout: 120_000 });
    await expect
      .poll(() => operation.textContent(), { timeout: 60_000 })
      .toMatch(/did not become ready within 30 s: blastplane-jobapi-\S+: (ImagePullBackOff|ErrImagePull)/);
    await expect
      .poll(() => page.getByRole("list", { name: "Job API pods" }).textContent(), { timeout: 60_000 })
      .toMatch(/ImagePullBackOff|ErrImagePull/);
    await checkPage(page, "cluster-deploy-failed");
  });

  it("B-003 B-004 B-027 a Contributor provisions the cluster, builds the image and deploys it from the page, and the job API is reported ready", async () => {
    const page = await signIn("Contributor");
    await page.getByRole("link", { name: "Cluster" }).click();
    const cluster = step(page, "Cluster running");
    // The provision and the build started by the test above, each followed to its end.
    // Each operation's first line: its state badge, then what it is.
    const headline = (label: string) => page.getByLabel(label).locator("p").first();
    await expect
      .poll(() => headline("Cluster operation").textContent(), { timeout: 180_000, interval: 500 })
      .toMatch(/^succeeded cluster\.provision/);
    expect(await page.getByRole("list", { name: "Cluster steps" }).textContent()).toMatch(
      /cluster: succeeded.*blast pool: succeeded.*role assignments: succeeded/,
    );
    await cluster
      .getByText(/The cluster is running \(provisioning Succeeded\); its BLAST pool has 1 × Standard_E8s_v5\./)
      .waitFor();
    await cluster.locator("h2").getByText("done").waitFor();

    const image = step(page, "Job API image present in the registry");
    await expect
      .poll(() => headline("Build operation").textContent(), { timeout: 180_000, interval: 500 })
      .toMatch(/^succeeded Build/);
    await image.locator("h2").getByText("done").waitFor();
    expect(await page.getByLabel("Build log").textContent()).toMatch(/Run ID: \S+ was successful/);
    const built = await image.getByText(/Built: /).textContent();
    const digest = /@(sha256:[0-9a-f]{64})/.exec(built ?? "")?.[1];
    expect(built).toContain(`${LOCAL_ARM_WORLD.registry}.azurecr.io/blastplane-jobapi@sha256:`);
    expect(digest).toBeDefined();

    // The deploy takes the digest the build produced, preselected.
    await expect.poll(() => page.getByLabel("Image digest").inputValue(), { timeout: 60_000 }).toBe(digest);
    await page.getByRole("button", { name: "Deploy the job API" }).click();
    await expect
      .poll(() => headline("Deploy operation").textContent(), { timeout: 180_000, interval: 500 })
      .toMatch(/^succeeded Deploy/);
    // The deployed job API runs on the local cluster (the kubelet gives the pod rendered for Azure the
    // stack's Azurite, token store and identity provider) and passes its readiness probe (/v1/ready):
    // the page, which keeps re-reading the deployment, shows it available and the step done.
    const deployed = step(page, "Job API deployed");
    await deployed.getByText(/^1 of 1 replicas available \(generation (\d+) of \1\)\.$/).waitFor({ timeout: 120_000 });
    await deployed.locator("h2").getByText("done").waitFor();
    await page.getByRole("list", { name: "Job API pods" }).getByText("ready").waitFor();
    await checkPage(page, "cluster-walk-deployed");
  });

  it("B-005 B-203 the walk goes on from the Cluster page to a completed search: the API token, a database added and warmed, a search from the browser whose shards run on the provisioned cluster", async () => {
    // 5. The API token: an Owner follows the step's link and makes a fresh one.
    const owner = await signIn("Owner");
    await owner.getByRole("link", { name: "Cluster" }).click();
    await step(owner, "API token configured").getByRole("link", { name: "API token" }).click();
    await owner.getByRole("button", { name: "Regenerate…" }).click();
    await owner
      .getByRole("dialog", { name: "Regenerate the API token?" })
      .getByRole("button", { name: "Regenerate token" })
      .click();
    await owner.getByText(/The previous token keeps working until/).waitFor();
    const fresh = await owner.getByLabel("Token", { exact: true }).inputValue();
    await owner.getByRole("link", { name: "Cluster" }).click();
    const tokenStep = step(owner, "API token configured");
    await tokenStep.getByText(`Ends in …${fresh.slice(-4)}.`).waitFor();
    await tokenStep.locator("h2").getByText("done").waitFor();
    // The deployed job API reads the token the dashboard keeps: it stays ready.
    await step(owner, "Job API deployed").locator("h2").getByText("done").waitFor();

    // 6. A database: added from a FASTA file on the Databases page the step links to, then warmed.
    const page = await signIn("Contributor");
    await page.getByRole("link", { name: "Cluster" }).click();
    await step(page, "BLAST database prepared and warm").getByRole("link", { name: "Databases" }).click();
    const fasta = path.join(stack.dataDir, "walk16s.fasta");
    writeFileSync(fasta, demoQueries(10, 1500, 100));
    await page.getByLabel("FASTA file", { exact: true }).setInputFiles(fasta);
    await page.locator("#upload-summary", { hasText: "10 sequences" }).waitFor();
    await page.getByRole("button", { name: "Add nucleotide database" }).click();
    const operations = page.getByRole("list", { name: "Operations" }).getByRole("listitem");
    await operations
      .filter({ hasText: "Adding" })
      .locator(".badge", { hasText: "succeeded" })
      .waitFor({ timeout: 120_000 });
    const row = page.getByRole("row", { name: /walk16s/ });
    await row.getByRole("button", { name: "Warm up walk16s" }).click();
    await operations
      .filter({ hasText: "Warming up" })
      .locator(".badge", { hasText: "succeeded" })
      .waitFor({ timeout: 120_000 });
    await row.locator(".badge", { hasText: "warm" }).waitFor();
    await page.getByRole("link", { name: "Cluster" }).click();
    const databaseStep = step(page, "BLAST database prepared and warm");
    await databaseStep.getByText(/Warm: .*walk16s/).waitFor();
    await databaseStep.locator("h2").getByText("done").waitFor();
    await checkPage(page, "cluster-walk-ready");

    // The first search, from the browser, against the database just added.
    await page.getByRole("link", { name: "New search" }).first().click();
    await page.locator("#program").selectOption("blastn");
    await page.locator("#db option[value='walk16s']").waitFor({ state: "attached" });
    await page.locator("#db").selectOption("walk16s");
    await page.getByLabel("Query (FASTA)").fill(demoQueries(1, 1500, 100));
    await page.getByLabel("Title (optional)").fill("First search of the walk");
    await page.getByRole("button", { name: "Submit search" }).click();
    await page.waitForURL(/\/blast\/jobs\/[0-9a-f-]{36}$/);
    await page.getByText("The search has completed.").waitFor({ timeout: 180_000 });
    // kubectl shows the cluster the walk made: the job API deployed and available, and the search's
    // shards run as Jobs on the provisioned BLAST pool's node.
    expect(await kubectl("get", "deploy/blastplane-jobapi", "-o", "jsonpath={.status.availableReplicas}")).toBe("1");
    // The search went through the job API the page deployed (the dashboard reaches it through the
    // cluster's Service), not the one the stack supervises: the deployed pod's log has the submit.
    const served = (await kubectl("logs", "deploy/blastplane-jobapi", "-c", "jobapi"))
      .split("\n")
      .filter((line) => line.includes('"msg":"request"'))
      .map((line) => JSON.parse(line) as { method: string; path: string; status: number });
    expect(served).toContainEqual(expect.objectContaining({ method: "POST", path: "/v1/jobs", status: 202 }));
    const shardNodes = await kubectl(
      "get",
      "pods",
      "-l",
      "app.kubernetes.io/managed-by=blastplane-jobapi,blastplane.io/database=walk16s",
      "-o",
      "jsonpath={.items[*].spec.nodeName}",
    );
    expect(shardNodes.split(" ").filter(Boolean)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^aks-blast-\d+-vmss\d+$/)]),
    );
  });

  it("B-026 a stopped cluster runs no search: the submit is refused saying so; started again, the search runs", async () => {
    // After the walk above: the cluster exists and runs. Through the dashboard API, no browser.
    const token = await mintToken(stack, "Contributor");
    const call = async (method: string, route: string, body?: unknown) => {
      const res = await fetch(`${stack.info.functions_url}/api/${route}`, {
        method,
        headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const finished = (started: { body: Record<string, unknown> }) => {
      const id = (started.body.operation as { operation_id: string }).operation_id;
      return eventually(
        async () => {
          const { body } = await call("GET", `operations/${id}`);
          return body.state === "succeeded" || body.state === "failed" ? body.state : undefined;
        },
        120_000,
        500,
      );
    };
    const search = { program: "blastn", db: DEMO_DB, query_fasta: demoQueries(1) };

    expect(await finished(await call("POST", "aks/cluster/stop"))).toBe("succeeded");
    expect((await call("GET", "aks/cluster")).body.cluster).toMatchObject({ power_state: "Stopped" });
    const refused = await call("POST", "blast/jobs", search);
    expect(refused.status).toBe(503);
    expect(refused.body.detail).toBe(
      "the cluster 'blastplane-aks' is stopped, so no search can run: start it on the Cluster page (POST /api/aks/cluster/start), then submit again",
    );
    expect(refused.body.request_id).toEqual(expect.any(String));

    expect(await finished(await call("POST", "aks/cluster/start"))).toBe("succeeded");
    const accepted = await call("POST", "blast/jobs", search);
    expect(accepted.status).toBe(200);
    const status = await eventually(
      async () => {
        const { body } = await call("GET", `blast/jobs/${accepted.body.job_id as string}`);
        return ["completed", "failed", "cancelled"].includes(String(body.status)) ? body : undefined;
      },
      180_000,
      1000,
    );
    expect(status).toMatchObject({ status: "completed" });
  });

  it("a Reader sees the checklist but no provision, build or deploy button", async () => {
    const page = await signIn("Reader");
    await page.getByRole("link", { name: "Cluster" }).click();
    await step(page, "Job API deployed").waitFor();
    await page.getByText("Deploying needs the Contributor role.").waitFor();
    await page.getByText("Provisioning the cluster needs the Contributor role.").waitFor();
    await page.getByText("Building the image needs the Contributor role.").waitFor();
    for (const name of ["Deploy the job API", "Provision the cluster", "Update the cluster", "Build the job API image"])
      expect(await page.getByRole("button", { name }).count()).toBe(0);
  });
});
