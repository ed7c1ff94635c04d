import { mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { expect } from "vitest";
import { ROOT } from "../support/local-stack.js";

/** Debian's Chromium (scripts/ensure-installed.mjs installs it); browser downloads are not reachable here. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Where the tests write their screenshots (git-ignored); a few are copied to docs/screenshots by hand. */
export const SCREENSHOT_DIR = path.join(ROOT, "test-output", "screenshots");

/**
 * `E2E_SCREENSHOTS=1` photographs each checked page at each width. Off in `npm test`: a screenshot
 * asserts nothing, and two full-page ones per check cost the suite ~20 s (docs/test-deep-runs.md).
 */
export const SCREENSHOTS = process.env.E2E_SCREENSHOTS === "1";

/** The widths every page is checked and photographed at: a phone and a laptop. */
export const WIDTHS = [390, 1280] as const;

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/**
 * Launches headless Chromium. Playwright gives each launch a fresh, empty profile; the flags keep
 * Chromium from reaching out to Google's services (refused on this machine's closed network).
 */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

/** Runs axe-core on the page as it is; serious and critical violations fail the test, naming each. */
export async function expectAccessible(page: Page, label: string): Promise<void> {
  // Evaluated through the DevTools protocol, so the app's CSP (script-src 'self') does not apply.
  // Once per document: a check after an in-app navigation or at the other width reuses it.
  const loaded = await page.evaluate(() => typeof (window as { axe?: { run?: unknown } }).axe?.run === "function");
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            context: Document,
            options: unknown,
          ): Promise<{
            violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[];
          }>;
        };
      }
    ).axe;
    const result = await axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
    }));
  });
  const serious = (violations as Violation[]).filter((v) => v.impact === "serious" || v.impact === "critical");
  expect(serious, `${label}: axe found serious or critical violations`).toEqual([]);
}

/**
 * Checks the page with axe and for sideways scrolling at each width (axe again at each: contrast,
 * target sizes and scrollable regions follow the layout), photographs it there (full page) with
 * `E2E_SCREENSHOTS=1`, then returns to the laptop width. `name` becomes `<name>-<width>.png`.
 */
export async function checkPage(page: Page, name: string): Promise<void> {
  if (SCREENSHOTS) mkdirSync(SCREENSHOT_DIR, { recursive: true });
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: 900 });
    // One frame for the layout to follow the new width.
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => resolve(undefined))));
    await expectAccessible(page, `${name} at ${width} px`);
    const overflow = await page.evaluate(
      () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
    );
    expect(overflow, `${name} at ${width} px scrolls sideways`).toBeLessThanOrEqual(0);
    if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}
