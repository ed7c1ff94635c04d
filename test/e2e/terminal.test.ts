import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEV_ACCOUNT, DEV_ACCOUNT_KEY } from "../../local/azurite.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { eventually, startStack, type TestStack } from "../support/local-stack.js";
import { launchChromium, SCREENSHOT_DIR, SCREENSHOTS } from "./browser.js";

/*
 * The browser terminal as a person uses it (issue 30): real Chromium, the real local stack (the
 * dashboard issues the ticket, the job API relays to the PTY daemon, whose shell's kubectl talks to
 * the local Kubernetes API). One stack for the file.
 */
let stack: TestStack;
let browser: Browser;

beforeAll(async () => {
  [stack, browser] = await Promise.all([startStack(), launchChromium()]);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  stack?.cleanup();
});

const audit = () =>
  createAuditLog(
    `DefaultEndpointsProtocol=http;AccountName=${DEV_ACCOUNT};AccountKey=${DEV_ACCOUNT_KEY};TableEndpoint=${stack.info.table_endpoint};`,
  );

async function signIn(role: "Reader" | "Contributor", name: string): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  await page.goto(`${stack.info.functions_url}/`);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/oauth2\/v2\.0\/authorize/);
  await page.getByLabel("Your name").fill(name);
  await page.getByRole("radio", { name: new RegExp(`^${role}`) }).check();
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".who .badge-role", { hasText: role }).waitFor();
  return page;
}

describe("the Terminal page", () => {
  it("B-173 runs kubectl get pods -n blastplane for a Contributor; closing the tab ends the session, audited", async () => {
    const page = await signIn("Contributor", "Terminal Contributor");
    await page.getByRole("link", { name: "Terminal" }).click();
    await page.getByRole("heading", { name: "Terminal" }).waitFor();
    await page.getByRole("status").filter({ hasText: "Time left" }).waitFor();
    await page.locator(".xterm").click();
    await page.keyboard.type("kubectl get pods -n blastplane\n");
    const rows = page.locator(".xterm-rows");
    await expect
      .poll(async () => (await rows.textContent()) ?? "", { timeout: 30_000 })
      .toMatch(/No resources found in blastplane namespace|NAME\s+READY\s+STATUS/);
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOT_DIR, "terminal-1280.png") });

    const opened = await eventually(async () =>
      (await audit().list({ action: "terminal.session_open" })).find(
        (e) => e.actor.name === "Terminal Contributor" && e.outcome === "succeeded",
      ),
    );
    await page.context().close();
    const closed = await eventually(async () =>
      (await audit().list({ action: "terminal.session_close" })).find(
        (e) => e.details.session_id === opened.details.session_id,
      ),
    );
    expect(closed.details).toMatchObject({ close_code: expect.any(Number) });
    expect(Number(closed.details.bytes_in)).toBeGreaterThanOrEqual("kubectl get pods -n blastplane".length);
    expect(JSON.stringify(closed)).not.toContain("kubectl");
  }, 180_000);

  it("B-172 refuses a Reader: the page says why, and the dashboard refuses the ticket (403)", async () => {
    const page = await signIn("Reader", "Terminal Reader");
    await page.getByRole("link", { name: "Terminal" }).click();
    await page.getByRole("alert").filter({ hasText: "Contributor role" }).waitFor();
    expect(await page.locator(".xterm").count()).toBe(0);
    // What the page would have asked for, with the Reader's own token.
    const status = await page.evaluate(async () => {
      const keys = Object.keys(sessionStorage).filter((k) => k.includes("accesstoken"));
      const entry = keys.map((k) => JSON.parse(sessionStorage.getItem(k) ?? "{}") as { secret?: string })[0];
      const res = await fetch("/api/terminal/tickets", {
        method: "POST",
        headers: { Authorization: `Bearer ${entry?.secret ?? ""}`, "Content-Type": "application/json" },
        body: "{}",
      });
      return res.status;
    });
    expect(status).toBe(403);
    await eventually(async () =>
      (await audit().list({ action: "terminal.ticket" })).find(
        (e) => e.actor.name === "Terminal Reader" && e.outcome === "denied",
      ),
    );
    await page.context().close();
  }, 120_000);
});
