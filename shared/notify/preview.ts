import { type Locale, translator } from "./localize.js";
import { renderEmail } from "./templates.js";
import type { Notification } from "./types.js";

/** The templates the preview renders (every template of the catalogs). */
export const PREVIEW_TEMPLATES = [
  "incident.open",
  "incident.severity_changed",
  "approval.request",
  "approval.reminder",
  "approval.digest",
  "break_glass.page",
  "notify.test",
] as const;
export type PreviewTemplate = (typeof PREVIEW_TEMPLATES)[number];

/** Synthetic placeholders, obviously not real data: a preview never reads an incident, approval or person. */
const SYNTHETIC: Record<PreviewTemplate, Record<string, string | number>> = {
  "incident.open": {
    incident_id: "inc_preview_0001",
    status: "open",
    severity: "high",
    opened_at: "2000-01-01T00:00:00Z",
    member_count: 3,
    assignment: "unassigned",
    audit_id: "aud_preview_0001",
  },
  "incident.severity_changed": {
    incident_id: "inc_preview_0001",
    from: "medium",
    to: "high",
    at: "2000-01-01T00:00:00Z",
  },
  "approval.request": { approval_id: "apr_000000000000000000000000", expires_at: "2000-01-01T04:00:00Z" },
  "approval.reminder": { approval_id: "apr_000000000000000000000000", expires_at: "2000-01-01T04:00:00Z" },
  "approval.digest": {
    count: 2,
    items:
      "- apr_000000000000000000000000 (decide before 2000-01-01T04:00:00Z)\n- apr_000000000000000000000001 (decide before 2000-01-01T04:00:00Z)",
  },
  "break_glass.page": { actor: "Preview Owner", expires_at: "2000-01-01T04:00:00Z", reason: "preview reason" },
  "notify.test": { sent_at: "2000-01-01T00:00:00Z", route: "operational_alert" },
};

/** A rendered preview: the email as the email channel would send it. */
export interface NotificationPreview {
  template: PreviewTemplate;
  locale: Locale;
  subject: string;
  text: string;
  html: string;
}

/**
 * Renders a template as the email channel would, in `locale`, from synthetic placeholders: nothing
 * is read and nothing is sent (issue 25, the email row's preview route).
 */
export function renderPreview(
  template: PreviewTemplate,
  locale: Locale,
  consoleBaseUrl: string | undefined,
): NotificationPreview {
  const message: Notification = {
    category: template.startsWith("approval.") ? "A1" : "A2",
    template_key: template,
    recipient: "preview",
    title: template,
    body_markdown: "",
    correlation_id: "preview",
    idempotency_key: "preview",
    params: SYNTHETIC[template],
  };
  const mail = renderEmail({ ...translator().localize(message, locale), locale }, consoleBaseUrl);
  return { template, locale, ...mail };
}
