import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";
import { expectAccessible, launchChromium } from "./browser.js";

/*
 * The console's web chat as an operator uses it: real Chromium, the real local stack and its
 * identity provider's PKCE sign-in, `POST /api/chat/stream` and `GET /api/live/stream`.
 * SVC_NARRATOR=none: the conversation uses canonical commands (a narrator is wired later).
 */
let stack: TestStack;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  [stack, browser] = await Promise.all([startStack(), launchChromium()]);
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  stack?.cleanup();
});

const app = () => stack.info.functions_url;

/**
 * Headless Chromium shows no system notifications to observe, so each tab's `Notification` is a
 * recorder with permission granted; everything else (opt-in, the ledger in localStorage under a Web
 * Lock, the live stream) is the app's own code.
 */
const NOTIFICATION_RECORDER = () => {
  const w = window as unknown as { __shown: { title: string; options: NotificationOptions }[]; __decisions: unknown[] };
  w.__shown = [];
  w.__decisions = [];
  window.addEventListener("blastplane:notify-decision", (event) => {
    w.__decisions.push((event as CustomEvent).detail);
  });
  class RecordingNotification {
    static permission = "granted";
    static requestPermission = async () => "granted";
    onclick: (() => void) | null = null;
    constructor(title: string, options: NotificationOptions) {
      w.__shown.push({ title, options });
    }
  }
  (window as unknown as { Notification: unknown }).Notification = RecordingNotification;
};

async function signIn(context: BrowserContext, role: string, name: string): Promise<Page> {
  const page = await context.newPage();
  page.setDefaultTimeout(30_000);
  await page.goto(`${app()}/console`);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/oauth2\/v2\.0\/authorize/);
  await page.getByLabel("Your name").fill(name);
  await page.getByRole("radio", { name: new RegExp(`^${role}`) }).check();
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator(".who .badge-role", { hasText: role }).waitFor();
  return page;
}

async function ask(page: Page, text: string) {
  await page.getByLabel("Your question or command").fill(text);
  await page.getByRole("button", { name: "Send" }).click();
}

describe("the console web chat in Chromium", () => {
  it("C-004 C-313 C-337: a Reader converses over the stream; answers cite evidence, refusals read as refusals; axe-clean", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const page = await signIn(context, "Reader", "E2E Reader");
    await page.getByRole("heading", { name: "Console" }).waitFor();
    const streamed = page.waitForResponse((r) => r.url().endsWith("/api/chat/stream"));
    await ask(page, "explore_catalog query=R-JOB-001");
    expect((await streamed).headers()["content-type"]).toBe("text/event-stream; charset=utf-8");
    const first = page.locator(".turn").first();
    await first.locator(".badge", { hasText: "Answer from tool evidence" }).waitFor();
    await first.locator(".activities code", { hasText: "catalog:rules@1,action_types@1" }).waitFor();
    await ask(page, "list_hil");
    const second = page.locator(".turn").nth(1);
    await second.locator(".badge", { hasText: "Refused" }).waitFor();
    await second
      .getByText("Refused: the tool list_hil requires the Approver role; your current role is Reader.", {
        exact: false,
      })
      .waitFor();
    await expectAccessible(page, "console");
  }, 180_000);

  it("C-458 C-321 C-469: after opt-in, an approval-needed frame raises one notification for two tabs of one Approver", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    await context.addInitScript(NOTIFICATION_RECORDER);
    // Counted from the start: a tab's stream may open before a later wait could see it.
    let liveStreams = 0;
    context.on("response", (r) => {
      if (r.url().endsWith("/api/live/stream") && r.status() === 200) liveStreams += 1;
    });
    const first = await signIn(context, "Approver", "E2E Approver");
    // Nothing is shown before the explicit opt-in.
    await first.getByRole("button", { name: "Turn on browser notifications" }).click();
    await first.getByRole("button", { name: "Turn off notifications" }).waitFor();
    // A second tab of the same principal (MSAL keeps its session per tab: it signs in again; the
    // development provider gives the same name the same object id, so the ledger is shared).
    const second = await signIn(context, "Approver", "E2E Approver");
    await second.getByRole("button", { name: "Turn off notifications" }).waitFor();
    // Both tabs are following the live stream before the frame is produced.
    await expect.poll(() => liveStreams, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);

    const contributor = await mintToken(stack, "Contributor", { oid: "oid-e2e-cora" });
    const res = await fetch(`${app()}/api/chat`, {
      method: "POST",
      headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
      body: JSON.stringify({ text: 'run_runbook name=kill_switch params={"on":true} dry_run=false' }),
    });
    expect(((await res.json()) as { kind: string }).kind).toBe("approval_filed");

    // Each tab decides once (under the shared lock); exactly one shows it.
    const decisions = async (p: Page) =>
      p.evaluate(() => (window as unknown as { __decisions: { shown: boolean }[] }).__decisions);
    await expect
      .poll(async () => (await decisions(first)).length + (await decisions(second)).length, { timeout: 60_000 })
      .toBe(2);
    const shown = [
      ...(await first.evaluate(() => (window as unknown as { __shown: unknown[] }).__shown)),
      ...(await second.evaluate(() => (window as unknown as { __shown: unknown[] }).__shown)),
    ] as { title: string; options: { body: string; tag: string; data: { link: string }; actions?: unknown } }[];
    expect(shown).toHaveLength(1);
    expect(shown[0]?.title).toBe("Approval needed");
    expect(shown[0]?.options.tag).toMatch(/^bp-[0-9a-f]{24}$/);
    expect(shown[0]?.options.data.link).toBe(`${app()}/console`);
    expect(shown[0]?.options.actions).toBeUndefined();
    const reasons = [...(await decisions(first)), ...(await decisions(second))] as {
      shown: boolean;
      reason?: string;
    }[];
    expect(reasons.filter((d) => !d.shown)).toEqual([expect.objectContaining({ reason: "same_tag" })]);
  }, 180_000);
});
