/**
 * English message catalog of the notification templates (issue 25 item 7), keyed by `template_key`.
 * i18next syntax: `{{name}}` interpolates a template parameter; `_one`/`_other` are plural forms
 * chosen by `count`. Every key here must exist in every other catalog (test/unit/notify-locales.test.ts).
 */
export const en = {
  approval: {
    request: {
      title: "Approval requested",
      body: "Approval {{approval_id}} is waiting for a decision before {{expires_at}}.",
    },
    reminder: {
      title: "Approval reminder",
      body: "Approval {{approval_id}} is still waiting for a decision before {{expires_at}}.",
    },
    digest: {
      title_one: "{{count}} approval requested",
      title_other: "{{count}} approvals requested",
      body_one: "{{count}} approval is waiting for a decision:\n{{items}}",
      body_other: "{{count}} approvals are waiting for a decision:\n{{items}}",
    },
  },
  break_glass: {
    page: {
      title: "Break-glass activation",
      body: "Break-glass was activated by {{actor}} until {{expires_at}}. Reason: {{reason}}",
    },
  },
  incident: {
    severity_changed: {
      title: "Incident {{incident_id}}: severity {{from}} → {{to}}",
      body: "The committed severity of incident {{incident_id}} rose from {{from}} to {{to}} at {{at}}.",
    },
    open: {
      subject: "[{{severity}}] Incident {{incident_id}} opened",
      incident: "Incident",
      status: "Status",
      severity: "Severity",
      opened: "Opened",
      events: "Events",
      assignment: "Assignment",
      unassigned: "unassigned",
      audit_id: "Audit id",
      open_in_console: "Open in the console",
    },
  },
  notify: {
    test: {
      title: "[TEST] blastplane test notification",
      body: "This is a test notification sent at {{sent_at}} through route {{route}}. No action is needed.",
    },
  },
};

/** The shape of a catalog: English's keys, strings at the leaves. */
export type Catalog = typeof en;

/** Another locale's catalog: any of English's keys (a missing one falls back to English). */
export type PartialCatalog = { [K in keyof Catalog]?: Partial<{ [T in keyof Catalog[K]]: Partial<Catalog[K][T]> }> };
