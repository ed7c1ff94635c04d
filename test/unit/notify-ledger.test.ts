import { describe, expect, it } from "vitest";
import {
  decide,
  EMPTY_LEDGER,
  ledgerKey,
  MAX_PER_MINUTE,
  mayNotify,
  type NotifyLedger,
  notificationLink,
  notificationText,
  SAME_TAG_SUPPRESSION_MS,
  tagOf,
} from "../../web/src/notify-ledger.js";

const frame = (kind: string, extra: Record<string, unknown> = {}) => ({
  kind,
  audit_id: "6f1c2a54-0000-4000-8000-000000000001",
  replay: false,
  link: "/console",
  ...extra,
});

describe("browser notification rules (web/src/notify-ledger.ts, spec §6 item 5, §8)", () => {
  it("C-460 C-462: only approval-needed, denied and failed-result frames may notify; successes and other kinds never", () => {
    for (const kind of ["approval_needed", "denied", "failed_result"]) expect(mayNotify(frame(kind)), kind).toBe(true);
    for (const kind of ["event_ingested", "verdict", "severity_changed", "approval_decided", "action_succeeded"])
      expect(mayNotify(frame(kind)), kind).toBe(false);
  });

  it("C-461: replayed frames (a resumed stream catching up) never notify", () => {
    expect(mayNotify(frame("approval_needed", { replay: true }))).toBe(false);
  });

  it("C-463 C-465 C-466: the text is localized and generic, the tag opaque and bounded", async () => {
    const en = notificationText("failed_result", "en-GB");
    const ko = notificationText("failed_result", "ko-KR");
    expect(en.title).toBe("Action failed");
    expect(ko.title).toBe("작업 실패");
    expect(notificationText("denied", "fr-FR")).toEqual(notificationText("denied", "en"));
    const tag = await tagOf(frame("failed_result"));
    expect(tag).toMatch(/^bp-[0-9a-f]{24}$/);
    expect(tag).not.toContain("6f1c2a54");
    // The same event always has the same tag (a repeat replaces its notification, C-467).
    expect(await tagOf(frame("failed_result"))).toBe(tag);
    expect(await tagOf(frame("denied"))).not.toBe(tag);
  });

  it("C-464: the link is a same-origin read-only console page whatever the frame says", () => {
    const origin = "https://console.example.org";
    expect(notificationLink(frame("denied", { link: "/console?incident=INC-0123456789ab" }), origin)).toBe(
      "https://console.example.org/console?incident=INC-0123456789ab",
    );
    for (const link of ["https://evil.example/console", "//evil.example/console", "/api/chat", "javascript:alert(1)"])
      expect(notificationLink(frame("denied", { link }), origin), link).toBe("https://console.example.org/console");
  });

  it("C-467 C-469: the same tag is suppressed for 5 minutes, then allowed again", () => {
    const t0 = 1_000_000;
    const first = decide(EMPTY_LEDGER, "bp-a", t0);
    expect(first.show).toBe(true);
    const again = decide(first.ledger, "bp-a", t0 + SAME_TAG_SUPPRESSION_MS - 1);
    expect(again).toMatchObject({ show: false, reason: "same_tag" });
    expect(decide(again.ledger, "bp-a", t0 + SAME_TAG_SUPPRESSION_MS).show).toBe(true);
  });

  it("C-470: at most 5 notifications a minute; the sixth waits for the minute to pass", () => {
    let ledger: NotifyLedger = EMPTY_LEDGER;
    const shown: boolean[] = [];
    for (let i = 0; i < 10; i++) {
      const d = decide(ledger, `bp-${i}`, 2_000_000 + i * 1000);
      ledger = d.ledger;
      shown.push(d.show);
    }
    expect(shown.filter(Boolean)).toHaveLength(MAX_PER_MINUTE);
    expect(decide(ledger, "bp-late", 2_000_000 + 60_000).show).toBe(true);
  });

  it("C-468: the ledger is keyed by the signed-in principal", () => {
    expect(ledgerKey("oid-a")).not.toBe(ledgerKey("oid-b"));
  });
});
