import { type Locale, translator } from "./localize.js";
import type { Notification } from "./types.js";

const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");

/** The fields of the incident-open email (spec §2.4 last row). */
export const INCIDENT_OPEN_FIELDS = [
  "incident_id",
  "status",
  "severity",
  "opened_at",
  "member_count",
  "assignment",
  "audit_id",
] as const;

/** The console link of an incident: HTTPS on `SVC_CONSOLE_BASE_URL`, or none. */
export function incidentLink(baseUrl: string | undefined, incidentId: string): string | undefined {
  if (!baseUrl?.startsWith("https://") && !baseUrl?.startsWith("http://127.0.0.1")) return undefined;
  return `${baseUrl.replace(/\/+$/, "")}/console?incident=${encodeURIComponent(incidentId)}`;
}

/**
 * Renders a message as an email. `incident.open` is the incident-open email: incident id, status,
 * severity, opened time, member count, assignment state, audit id and the HTTPS console link —
 * nothing else (no raw errors, resource ids or personal data).
 */
export function renderEmail(
  message: Notification & { locale?: Locale },
  consoleBaseUrl: string | undefined,
): { subject: string; text: string; html: string } {
  if (message.template_key === "incident.open" && message.params) {
    const p = message.params;
    const locale = message.locale ?? "en";
    const label = (name: string, params: Record<string, string> = {}) =>
      translator().translate(`incident.open.${name}`, locale, params) ?? name;
    const id = String(p.incident_id ?? "");
    const link = message.console_url ?? incidentLink(consoleBaseUrl, id);
    const rows: [string, string][] = [
      [label("incident"), id],
      [label("status"), String(p.status ?? "")],
      [label("severity"), String(p.severity ?? "")],
      [label("opened"), String(p.opened_at ?? "")],
      [label("events"), String(p.member_count ?? "")],
      [label("assignment"), String(p.assignment ?? label("unassigned"))],
      [label("audit_id"), String(p.audit_id ?? message.audit_id ?? "")],
    ];
    const subject = label("subject", { severity: String(p.severity ?? "").toUpperCase(), incident_id: id });
    const open = label("open_in_console");
    const text = [subject, "", ...rows.map(([k, v]) => `${k}: ${v}`), "", link ? `${open}: ${link}` : ""].join("\n");
    const html = `<h2>${escapeHtml(subject)}</h2><table>${rows
      .map(([k, v]) => `<tr><th align="left">${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`)
      .join("")}</table>${link ? `<p><a href="${escapeHtml(link)}">${escapeHtml(open)}</a></p>` : ""}`;
    return { subject, text, html };
  }
  const subject = `[${message.category}] ${message.title}`;
  const text = [
    message.title,
    "",
    message.body_markdown,
    "",
    ...(message.runbook_url ? [`Runbook: ${message.runbook_url}`] : []),
    ...(message.console_url ? [`Console: ${message.console_url}`] : []),
    ...(message.audit_id ? [`Audit id: ${message.audit_id}`] : []),
  ].join("\n");
  const html = `<h2>${escapeHtml(message.title)}</h2><p>${escapeHtml(message.body_markdown).replace(/\n/g, "<br>")}</p>${
    message.console_url ? `<p><a href="${escapeHtml(message.console_url)}">Open in the console</a></p>` : ""
  }`;
  return { subject, text, html };
}
