import { Cron } from "croner";

/**
 * Timer-trigger schedules as Azure Functions reads them: six-field NCRONTAB expressions
 * (`{second} {minute} {hour} {day} {month} {day-of-week}`) or a TimeSpan interval (`hh:mm:ss`).
 * Occurrences are computed by `croner`; this module keeps Azure's NCRONTAB rules around it.
 *
 * All times are UTC. Azure also evaluates schedules in UTC unless `WEBSITE_TIME_ZONE` is set; the
 * local host does not honour that setting.
 */

/** A parsed timer schedule. */
export interface CronSchedule {
  /** The expression as given. */
  expression: string;
  /** The first occurrence strictly after `after`. */
  next(after: Date): Date;
}

const FIELD_NAMES = ["second", "minute", "hour", "day", "month", "day-of-week"] as const;
/** Each field's range (day-of-week 7 is Sunday again). */
const FIELD_MIN = [0, 0, 0, 1, 1, 0] as const;
const FIELD_MAX = [59, 59, 23, 31, 12, 7] as const;
/** Where `a/n` runs to in each field (day-of-week stops at 6: 7 is Sunday again). */
const FIELD_LAST = [59, 59, 23, 31, 12, 6] as const;
const MAX_DATE_MS = 8.64e15;
/** Month and day names, the only letters NCRONTAB has (croner's `L`, `W`, `#` and `?` are not NCRONTAB). */
const NAMES = /\b(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT)\b/gi;

/** croner's options for an NCRONTAB schedule: six fields, UTC, and a date must match day AND day-of-week. */
const CRON_OPTIONS = { mode: "6-part", utcOffset: 0, domAndDow: true, paused: true } as const;

/**
 * Parses a timer schedule.
 *
 * NCRONTAB form: six whitespace-separated fields; each field is a comma list of `*`, `n`, `a-b`,
 * `*\/n`, `a-b/n` or `a/n` (from `a` to the field's maximum in steps of `n`). Months accept
 * `JAN`–`DEC` and days of week `SUN`–`SAT` (case-insensitive, three letters); day-of-week is 0–6
 * with 0 = Sunday, and 7 also means Sunday. Day and day-of-week combine as in Azure's NCrontab
 * library: a date must match both (so `0 0 8 1-7 * TUE` is the first Tuesday of each month), unlike
 * classic cron's either-or (croner's `domAndDow`). croner's extensions (`L`, `W`, `#`, `?`, a year
 * field) are refused: Azure would refuse them.
 *
 * TimeSpan form: `hh:mm:ss` (hh below 24), `dd:hh:mm` (when the first number is 24 or more, as
 * .NET's TimeSpan.Parse reads it), `d.hh:mm:ss` or `hh:mm`. The schedule fires every interval:
 * `next(after)` is `after + interval`, with no alignment to wall-clock boundaries.
 *
 * @throws Error naming the offending field for a wrong field count (five-field crontab included),
 * garbage, out-of-range values, reversed ranges or a zero step; for a zero or malformed TimeSpan;
 * and for a schedule that can never fire (e.g. `0 0 0 30 2 *`), so `next()` always has an answer.
 */
export function parseNcrontab(expression: string): CronSchedule {
  const trimmed = expression.trim();
  if (/^[\d.:]+$/.test(trimmed) && trimmed.includes(":")) return parseTimeSpan(expression, trimmed);

  const parts = trimmed === "" ? [] : trimmed.split(/\s+/);
  if (parts.length !== FIELD_NAMES.length) {
    throw new Error(
      `invalid NCRONTAB expression "${expression}": expected 6 fields ` +
        `({second} {minute} {hour} {day} {month} {day-of-week}), got ${parts.length}`,
    );
  }
  const fields = parts.map((text, i) => ncrontabField(expression, i, text));
  const cron = new Cron(fields.join(" "), CRON_OPTIONS);
  if (cron.nextRun(new Date(Date.UTC(2000, 0, 1))) === null)
    throw new Error(`invalid NCRONTAB expression "${expression}": the day and month fields never coincide`);

  return {
    expression,
    next(after) {
      const start = after.getTime();
      if (Number.isNaN(start)) throw new Error("next() needs a valid date");
      const next = cron.nextRun(new Date(Math.floor(start / 1000) * 1000));
      if (next === null || !(Math.abs(next.getTime()) <= MAX_DATE_MS))
        throw new Error(`NCRONTAB schedule "${expression}" has no occurrence after ${after.toISOString()}`);
      return next;
    },
  };
}

/**
 * One field in croner's spelling, or an Error naming the field: `a/n` becomes `a-<last>/n` (croner
 * takes only `*\/n` and `a-b/n`), croner's extensions are refused, and croner judges the rest with
 * every other field a wildcard, so its refusal is about this field alone.
 */
function ncrontabField(expression: string, index: number, text: string): string {
  const fail = (reason: string): never => {
    throw new Error(`invalid NCRONTAB expression "${expression}": ${FIELD_NAMES[index]} field "${text}": ${reason}`);
  };
  if (/[LW#?]/i.test(text.replace(NAMES, ""))) fail(`"L", "W", "#" and "?" are not NCRONTAB`);
  const [min, max] = [FIELD_MIN[index] ?? 0, FIELD_MAX[index] ?? 0];
  for (const value of text.replace(/\/\d*/g, "").match(/\d+/g) ?? []) {
    if (Number(value) < min || Number(value) > max) fail(`${value} is out of range ${min}-${max}`);
  }
  const items = text.split(",").map((item) => {
    if (item === "" || item.startsWith("/")) fail(`empty value in "${text}"`);
    const start = /^([0-9A-Za-z]+)\/(.*)$/.exec(item);
    return start ? `${start[1]}-${FIELD_LAST[index]}/${start[2]}` : item;
  });
  const field = items.join(",");
  const alone = FIELD_NAMES.map((_, i) => (i === index ? field : "*")).join(" ");
  try {
    new Cron(alone, CRON_OPTIONS);
  } catch (error) {
    fail(error instanceof Error ? error.message.replace(/^CronPattern: /, "") : String(error));
  }
  return field;
}

/**
 * Whether a timer invocation is late: true when `now` is more than `toleranceMs` (default 1000 ms)
 * past the `scheduled` time. Feeds the `isPastDue` flag of the timer payload.
 */
export function isPastDue(scheduled: Date, now: Date, toleranceMs = 1000): boolean {
  return now.getTime() - scheduled.getTime() > toleranceMs;
}

function parseTimeSpan(expression: string, text: string): CronSchedule {
  const fail = (reason: string): never => {
    throw new Error(`invalid TimeSpan schedule "${expression}": ${reason}`);
  };
  const match = /^(?:(\d+)\.)?(\d+):(\d+)(?::(\d+))?$/.exec(text);
  if (match === null) return fail("expected hh:mm:ss, dd:hh:mm, d.hh:mm:ss or hh:mm");
  const [, dayText, first = "", second = "", third] = match;
  let [days, hours, minutes, seconds] = [Number(dayText ?? 0), Number(first), Number(second), Number(third ?? 0)];
  if (dayText === undefined && third !== undefined && hours >= 24) {
    // .NET's TimeSpan.Parse reads "25:00:00" as 25 days, which Azure documents as the dd:hh:mm form.
    [days, hours, minutes, seconds] = [hours, minutes, seconds, 0];
  }
  if (hours > 23) fail(`hours ${hours} out of range 0-23`);
  if (minutes > 59) fail(`minutes ${minutes} out of range 0-59`);
  if (seconds > 59) fail(`seconds ${seconds} out of range 0-59`);
  const interval = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000;
  if (interval === 0) fail("interval must be greater than zero");
  return {
    expression,
    next(after) {
      const ms = after.getTime() + interval;
      if (!(Math.abs(ms) <= MAX_DATE_MS)) throw new Error(`TimeSpan schedule "${expression}" runs past the last date`);
      return new Date(ms);
    },
  };
}
