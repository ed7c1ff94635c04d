import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAi, startFakeOpenAi } from "../support/fake-openai.js";
import { mintToken, startStack, type TestStack } from "../support/local-stack.js";
import { expectAccessible, launchChromium } from "./browser.js";

/*
 * The console's web chat as an operator uses it: real Chromium, the real local stack and its
 * identity provider's PKCE sign-in, `POST /api/chat/stream`, `GET /api/live/stream` and
 * `GET /api/approvals`. The narrator is the OpenAI adapter over a scripted OpenAI-compatible
 * server (test/support/fake-openai.ts) through the real `openai` client; canonical commands never
 * reach it, and anything unscripted answers 500.
 */
let stack: TestStack;
let browser: Browser;
let narrator: FakeOpenAi;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  narrator = await startFakeOpenAi();
  [stack, browser] = await Promise.all([
    startStack({
      env: {
        SVC_NARRATOR: "openai",
        SVC_NARRATOR_BASE_URL: narrator.url,
        SVC_NARRATOR_MODEL: "scripted-model",
        // Break-glass pages this Owner through the local notification sinks.
        SVC_BREAK_GLASS_OWNERS: "oid-e2e-paged-owner",
      },
    }),
    launchChromium(),
  ]);
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  stack?.cleanup();
  await narrator?.close();
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

/** Files a kill-switch approval as a Contributor through the API (it needs an Owner to decide); returns its id. */
async function pendingApproval(): Promise<string> {
  const contributor = await mintToken(stack, "Contributor", { oid: "oid-e2e-filer" });
  const res = await fetch(`${app()}/api/chat`, {
    method: "POST",
    headers: { Authorization: `Bearer ${contributor}`, "Content-Type": "application/json" },
    body: JSON.stringify({ text: 'run_runbook name=kill_switch params={"on":true} dry_run=false' }),
  });
  const filed = (await res.json()) as { kind: string; approval_id: string };
  expect(filed.kind).toBe("approval_filed");
  return filed.approval_id;
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

  it("C-348 C-349 C-372 C-183 C-188: the approvals queue: the server decides who may decide (an Approver not for a kill switch, nobody their own); an Owner signs in again and rejects; break-glass shows its TTL", async () => {
    const filed = { approval_id: await pendingApproval() };
    const item = (p: Page) => p.locator(`.approval-item[data-approval-id="${filed.approval_id}"]`);

    // An Approver sees the item but may not decide a kill switch: the server says it needs an Owner.
    const approverContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(approverContext);
    const approver = await signIn(approverContext, "Approver", "E2E Queue Approver");
    await item(approver).getByText("Deciding it needs the Owner role.").waitFor();
    expect(await item(approver).getByRole("button", { name: "Reject" }).count()).toBe(0);

    // A second user, an Owner, decides it: first a fresh sign-in (prompt=login, C-372), then the
    // round trip with that sign-in's token and the item's action_hash.
    const ownerContext = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(ownerContext);
    const owner = await signIn(ownerContext, "Owner", "E2E Queue Owner");
    await item(owner).getByLabel(`Justification for ${filed.approval_id}`).fill("not during the run");
    await item(owner).getByRole("button", { name: "Reject" }).click();
    await owner.waitForURL(/\/oauth2\/v2\.0\/authorize/);
    expect(new URL(owner.url()).searchParams.get("prompt")).toBe("login");
    await owner.getByLabel("Your name").fill("E2E Queue Owner");
    await owner.getByRole("radio", { name: /^Owner/ }).check();
    await owner.getByRole("button", { name: "Sign in" }).click();
    await owner
      .getByRole("status")
      .filter({ hasText: filed.approval_id })
      .getByText("Rejected: the decision is recorded (state rejected).")
      .waitFor();
    await item(owner).waitFor({ state: "detached" });

    // The Owner's own filing: listed, but the server refuses self-approval, so no controls (C-348, C-349).
    await ask(owner, 'run_runbook name=kill_switch params={"on":false} dry_run=false');
    const filing = owner.locator(".turn").last();
    await filing.locator(".badge", { hasText: "Filed for approval" }).waitFor();
    const own = ((await filing.locator(".answer-text").textContent()) ?? "").match(/apr_[0-9a-f]{24}/)?.[0];
    expect(own).toBeDefined();
    await owner.getByRole("button", { name: "Refresh" }).click();
    const ownItem = owner.locator(`.approval-item[data-approval-id="${own}"]`);
    await ownItem.getByText("You requested this approval: another approver must decide it.").waitFor();
    expect(await ownItem.getByRole("button", { name: "Approve" }).count()).toBe(0);

    // Break-glass: a reason and at most 4 hours; the result shows the TTL and the confirmed pages.
    await owner.getByLabel("Reason for break-glass").fill("the identity provider is down for the whole team");
    await owner.getByLabel("Expires after").selectOption("14400");
    await owner.getByRole("button", { name: "Request break-glass" }).click();
    const result = owner.getByTestId("break-glass-result");
    await result.getByText(/TTL 4 h, 14400 s/).waitFor();
    expect(await result.textContent()).toMatch(
      /Owners paged: 1 of 1 confirmed\. Audit entry [0-9a-f-]{36}\. No role was granted\./,
    );
    await expectAccessible(owner, "console with approvals and break-glass");
  }, 240_000);

  it("C-315 C-004 C-338: a Reader sees only the approvals count; a scripted narrator's answer streams into the page sentence by sentence; Cancel mid-answer aborts the provider request; the narrator's plan is final", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    const page = await signIn(context, "Reader", "E2E Narrated Reader");
    // The approvals queue as a Reader sees it (spec §2.2): how many wait, nothing about them, no
    // decision controls (checked on this page to spare the suite a sign-in).
    const pending = await pendingApproval();
    await page.getByRole("button", { name: "Refresh" }).click();
    await page
      .getByTestId("approvals-count")
      .getByText(/\d+ approvals? (is|are) waiting/)
      .waitFor();
    expect(await page.getByText(pending).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Approve" }).count()).toBe(0);

    const ref = "catalog:rules@1,action_types@1";
    const rendering = (first: string, second: string, field: string) =>
      JSON.stringify({
        evidence_ref: ref,
        sentences: [
          { text: first, cites: [{ evidence_ref: ref, field }] },
          { text: second, cites: [{ evidence_ref: ref, field: "rules[0].description" }] },
        ],
      });
    const translation = (query: string) => ({
      tool_calls: [{ name: "explore_catalog", arguments: { query } }],
    });

    // 1. The presentation pass stops after its first sentence until the test lets it go on.
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const first = rendering("Rule R-JOB-002 covers that signal.", "The submitter has to fix the input.", "rules[0].id");
    narrator.script(translation("preflight.failed"), {
      content: first,
      holdAfterChars: first.indexOf(',"cites"'),
      release: released,
    });
    await ask(page, "What do the rules say about preflight.failed?");
    const turn = page.locator(".turn").last();
    await turn.getByTestId("provisional").getByText("Rule R-JOB-002 covers that signal.").waitFor();
    // Shown while the provider is still answering: no answer yet, the turn is still streaming.
    expect(await turn.locator(".answer-text").count()).toBe(0);
    expect(await turn.getAttribute("data-state")).toBe("streaming");
    release();
    await turn
      .locator(".answer-text")
      .getByText("Rule R-JOB-002 covers that signal. The submitter has to fix the input.", { exact: false })
      .waitFor();
    await turn.locator(".badge", { hasText: "Answer from tool evidence" }).waitFor();
    expect(await turn.getByTestId("provisional").count()).toBe(0);
    // The final frame follows once the presentation plan is settled (unscripted here: the provider's 500).
    await expect.poll(() => turn.getAttribute("data-state"), { timeout: 30_000 }).toBe("done");

    // 2. Cancel mid-answer: the provider never finishes; closing the stream aborts its request.
    const hanging = rendering("Rule R-DB-001 covers that signal.", "A newer release is proposed.", "rules[0].id");
    narrator.script(translation("database.update_available"), {
      content: hanging,
      holdAfterChars: hanging.indexOf(',"cites"'),
    });
    await ask(page, "What do the rules say about database.update_available?");
    const cancelled = page.locator(".turn").last();
    await cancelled.getByTestId("provisional").getByText("Rule R-DB-001 covers that signal.").waitFor();
    const aborted = narrator.nextAbort();
    await page.getByRole("button", { name: "Cancel" }).click();
    const request = await aborted;
    expect(request.body).toMatchObject({ stream: true });
    await cancelled.getByText("Cancelled: the stream was closed and the work stopped.").waitFor();
    const afterCancel = narrator.requests.length;

    // 3. The server stopped too: the next narrated turn makes exactly its own calls (translation,
    // presentation, presentation plan), nothing left over; its plan is the narrator's (§4, §8).
    const third = rendering(
      "Rule R-JOB-001 covers that signal.",
      "A failed search is proposed for one retry.",
      "rules[0].id",
    );
    const tablePlan = {
      artifact: "presentation_artifact",
      version: 1,
      blocks: [{ type: "answer_text" }, { type: "evidence", result_index: 0, evidence_ref: ref, layout: "table" }],
    };
    narrator.script(translation("job.failed"), { content: third }, { content: JSON.stringify(tablePlan) });
    await ask(page, "What do the rules say about job.failed?");
    const last = page.locator(".turn").last();
    await last.locator(".answer-text").getByText("Rule R-JOB-001 covers that signal.", { exact: false }).waitFor();
    await page.locator('.turn[data-state="done"][data-plan-source="narrator"]').last().waitFor();
    const later = narrator.requests.slice(afterCancel);
    expect(later).toHaveLength(3);
    expect(later.map((r) => JSON.stringify(r.body.messages).includes("job.failed"))).toEqual([true, true, true]);
  }, 240_000);
});
