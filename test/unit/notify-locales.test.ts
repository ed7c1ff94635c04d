/**
 * Issue 25 item 7: message templates in per-locale catalogs (`en`, `ko`) through i18next; a
 * channel's `locale` picks the catalog, English is the fallback, then the emitter's own text.
 */
import { describe, expect, it } from "vitest";
import { CATALOGS, createTranslator, LOCALES, translator } from "../../shared/notify/localize.js";
import { renderEmail } from "../../shared/notify/templates.js";
import type { Notification } from "../../shared/notify/types.js";

/** Every leaf key of a catalog, dotted; plural forms folded to their base key. */
function keysOf(catalog: object, prefix = ""): string[] {
  return Object.entries(catalog).flatMap(([k, v]) =>
    typeof v === "string"
      ? [`${prefix}${k.replace(/_(zero|one|two|few|many|other)$/, "")}`]
      : keysOf(v, `${prefix}${k}.`),
  );
}

const message = (overrides: Partial<Notification>): Notification => ({
  category: "A2",
  template_key: "incident.severity_changed",
  recipient: "operational",
  title: "emitter's title",
  body_markdown: "emitter's body",
  correlation_id: "inc-1",
  idempotency_key: "k-1",
  ...overrides,
});

describe("notification locales", () => {
  it("C-540 every key of the English catalog exists in every other catalog (the missing ones are listed)", () => {
    const english = new Set(keysOf(CATALOGS.en));
    for (const locale of LOCALES) {
      const have = new Set(keysOf(CATALOGS[locale]));
      const missing = [...english].filter((k) => !have.has(k));
      expect(missing, `keys missing in ${locale}`).toEqual([]);
      expect(
        [...have].filter((k) => !english.has(k)),
        `keys in ${locale} that English lacks`,
      ).toEqual([]);
    }
  });

  it("C-540 C-249 renders each template in en and ko from its parameters, with no placeholder left", () => {
    const cases: [string, Record<string, string | number>][] = [
      ["approval.request", { approval_id: "apr_1", expires_at: "2026-11-28T00:00:00Z" }],
      ["approval.reminder", { approval_id: "apr_1", expires_at: "2026-11-28T00:00:00Z" }],
      ["approval.digest", { count: 3, items: "- apr_1\n- apr_2\n- apr_3" }],
      ["break_glass.page", { actor: "Ada", expires_at: "2026-11-28T00:00:00Z", reason: "cluster down" }],
      ["incident.severity_changed", { incident_id: "inc-9", from: "medium", to: "high", at: "2026-11-27T21:00:00Z" }],
      ["notify.test", { sent_at: "2026-11-27T21:00:00Z", route: "operational_alert" }],
    ];
    for (const [template_key, params] of cases) {
      const english = translator().localize(message({ template_key, params }), "en");
      const korean = translator().localize(message({ template_key, params }), "ko");
      for (const m of [english, korean]) {
        expect(m.title, template_key).not.toBe("emitter's title");
        expect(`${m.title}\n${m.body_markdown}`, template_key).not.toContain("{{");
        for (const value of Object.values(params)) expect(m.body_markdown + m.title).toContain(String(value));
      }
      expect(korean.title, template_key).not.toBe(english.title);
      expect(`${korean.title}${korean.body_markdown}`, template_key).toMatch(/[\uAC00-\uD7A3]/);
    }
    const digest = (count: number) =>
      translator().localize(message({ template_key: "approval.digest", params: { count, items: "-" } }), "en").title;
    expect(digest(1)).toBe("1 approval requested");
    expect(digest(2)).toBe("2 approvals requested");
  });

  it("a key missing in the channel's locale falls back to English; an unknown template or a missing parameter keeps the emitter's text", () => {
    const partial = createTranslator({ en: CATALOGS.en, ko: { notify: {} } });
    const params = { sent_at: "2026-11-27T21:00:00Z", route: "r" };
    expect(partial.localize(message({ template_key: "notify.test", params }), "ko").title).toBe(
      "[TEST] blastplane test notification",
    );
    expect(partial.localize(message({ template_key: "incident.severity_changed" }), "ko")).toMatchObject({
      title: "emitter's title",
      body_markdown: "emitter's body",
    });
    expect(translator().localize(message({ template_key: "ops.unknown_alert", params }), "ko").title).toBe(
      "emitter's title",
    );
  });

  it("C-249 the incident-open email in Korean: Korean labels, the same fields and link", () => {
    const mail = renderEmail(
      {
        ...message({
          template_key: "incident.open",
          params: {
            incident_id: "inc_7",
            status: "open",
            severity: "high",
            opened_at: "2026-11-27T10:00:00Z",
            member_count: 2,
            audit_id: "aud_1",
          },
        }),
        locale: "ko",
      },
      "https://console.ops.example",
    );
    expect(mail.subject).toBe("[HIGH] 인시던트 inc_7 발생");
    for (const line of ["상태: open", "심각도: high", "이벤트 수: 2", "담당: 미지정", "감사 ID: aud_1"])
      expect(mail.text).toContain(line);
    expect(mail.html).toContain('<a href="https://console.ops.example/console?incident=inc_7">콘솔에서 열기</a>');
  });
});
