/**
 * The A4 briefing composer (spec operator-console.md §6 item 6): a deterministic summary of one
 * digest period from what it is given, and nothing else. The same input always gives the same
 * briefing (no clock, no randomness, fixed orders); an input left out gets no line at all, not a
 * zero; a period with nothing significant gives the no-significant-activity headline with
 * `has_significant_activity: false`, and the caller sends nothing.
 */

export const SEVERITIES = ["critical", "high", "medium", "low", "info"] as const;
export type Severity = (typeof SEVERITIES)[number];

/** A notice batched into the digest instead of being sent on its own. */
export interface DigestNotice {
  severity: Severity;
  template_key: string;
  title: string;
  correlation_id: string;
  at: string;
}

/** A count a digest's source read from the product's stores, with the items behind it (at most 20 listed). */
export interface BriefingFact {
  label: string;
  count: number;
  items?: string[];
}

export interface BriefingInput {
  /** The digest's title (`Daily shadow-accuracy report`, …). */
  title: string;
  /** The period summarised, ISO instants, `to` exclusive. */
  period: { from: string; to: string };
  /** Incidents of the period by severity; absent: the briefing says nothing about incidents. */
  incidents?: Partial<Record<Severity, number>>;
  /** Action outcomes of the period (spec: auto / human-approved / rolled-back / observation-only). */
  actions?: { auto: number; human_approved: number; rolled_back: number; observation_only: number };
  /** Cost run-rate (per day) at the start and end of the period, and the forecast risk if known. */
  cost?: { run_rate_before: number; run_rate_now: number; currency: string; forecast_risk?: "low" | "medium" | "high" };
  /** Guard metrics past their threshold: each an explicit escalation. */
  guard_breaches?: { metric: string; value: number; threshold: number }[];
  /** Low-severity notices batched into this digest. */
  notices?: DigestNotice[];
  /** What the digest's source counted (`Override drafts filed: 3.`); a fact above zero is significant. */
  facts?: BriefingFact[];
}

export interface Briefing {
  headline: string;
  /** The briefing's lines, in a fixed order. */
  lines: string[];
  /** Guard-metric breaches, each as an escalation line. */
  escalations: string[];
  has_significant_activity: boolean;
  /** The relative change of the cost run-rate, when cost was given (0.012 = +1.2 %). */
  cost_delta?: number;
}

/** A cost swing below this, on its own, is noise (spec §6 item 6). */
export const COST_NOISE = 0.01;

const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const percent = (x: number) => `${x >= 0 ? "+" : "−"}${Math.abs(x * 100).toFixed(1)}%`;
const money = (x: number, currency: string) => `${x.toFixed(2)} ${currency}`;

/** Composes the briefing of one digest period. */
export function composeBriefing(input: BriefingInput): Briefing {
  const lines: string[] = [];
  const escalations: string[] = [];
  let significant = false;

  if (input.incidents) {
    const tally = SEVERITIES.map((s) => [s, Math.max(0, Math.trunc(input.incidents?.[s] ?? 0))] as const);
    const total = tally.reduce((sum, [, n]) => sum + n, 0);
    if (total > 0) significant = true;
    lines.push(
      total === 0
        ? "Incidents: none."
        : `Incidents: ${total} (${tally
            .filter(([, n]) => n > 0)
            .map(([s, n]) => `${s} ${n}`)
            .join(", ")}).`,
    );
  }
  if (input.actions) {
    const a = input.actions;
    const total = a.auto + a.human_approved + a.rolled_back + a.observation_only;
    if (total > 0) significant = true;
    lines.push(
      `Actions: ${total} — auto ${a.auto}, human-approved ${a.human_approved}, rolled back ${a.rolled_back}, observation only ${a.observation_only}.`,
    );
  }
  let costDelta: number | undefined;
  if (input.cost) {
    const { run_rate_before: before, run_rate_now: now, currency } = input.cost;
    costDelta = before > 0 ? (now - before) / before : now > 0 ? 1 : 0;
    // Under 1 %, alone, it is noise: reported, never significant by itself.
    if (Math.abs(costDelta) >= COST_NOISE) significant = true;
    lines.push(
      `Cost run-rate: ${money(now, currency)}/day (${percent(costDelta)} from ${money(before, currency)}/day)${
        Math.abs(costDelta) < COST_NOISE ? ", within noise" : ""
      }.`,
    );
    if (input.cost.forecast_risk) lines.push(`Forecast risk: ${input.cost.forecast_risk}.`);
  }
  if (input.guard_breaches) {
    for (const b of [...input.guard_breaches].sort((x, y) => x.metric.localeCompare(y.metric)))
      escalations.push(`ESCALATION: guard metric ${b.metric} at ${b.value} breached its threshold ${b.threshold}.`);
    if (escalations.length > 0) significant = true;
  }
  if (input.notices) {
    const notices = [...input.notices].sort(
      (x, y) => x.at.localeCompare(y.at) || x.correlation_id.localeCompare(y.correlation_id),
    );
    if (notices.length > 0) {
      significant = true;
      const bySeverity = SEVERITIES.map((s) => [s, notices.filter((n) => n.severity === s).length] as const).filter(
        ([, n]) => n > 0,
      );
      lines.push(`Notices: ${notices.length} (${bySeverity.map(([s, n]) => `${s} ${n}`).join(", ")}).`);
      for (const n of notices.slice(0, 20)) lines.push(`- [${n.severity}] ${n.title}`);
      if (notices.length > 20) lines.push(`- … and ${count(notices.length - 20, "more notice")}`);
    }
  }
  for (const fact of input.facts ?? []) {
    const n = Math.max(0, Math.trunc(fact.count));
    if (n > 0) significant = true;
    lines.push(`${fact.label}: ${n}.`);
    const items = fact.items ?? [];
    for (const item of items.slice(0, 20)) lines.push(`- ${item}`);
    if (items.length > 20) lines.push(`- … and ${items.length - 20} more`);
  }
  const headline = significant
    ? `${input.title}: ${input.period.from.slice(0, 10)} to ${input.period.to.slice(0, 10)}${
        escalations.length > 0 ? ` — ${count(escalations.length, "escalation")}` : ""
      }`
    : `${input.title}: no significant activity`;
  return {
    headline,
    lines,
    escalations,
    has_significant_activity: significant,
    ...(costDelta !== undefined ? { cost_delta: costDelta } : {}),
  };
}

/** The briefing as a message body (Markdown): escalations first. */
export function briefingMarkdown(b: Briefing): string {
  return [...b.escalations, ...b.lines].join("\n");
}
