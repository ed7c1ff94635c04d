/**
 * Timer-trigger schedules as Azure Functions reads them: six-field NCRONTAB expressions
 * (`{second} {minute} {hour} {day} {month} {day-of-week}`) or a TimeSpan interval (`hh:mm:ss`).
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

interface FieldSpec {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /** Where `*` and `a/n` stop; below `max` only for day-of-week, whose 7 duplicates 0. */
  readonly last: number;
  readonly names?: readonly string[];
}

interface Field {
  /** Allowed values, ascending. */
  readonly values: readonly number[];
  readonly allowed: readonly boolean[];
  /** False when the field allows every value of its range. */
  readonly restricted: boolean;
}

const MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAY_NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const FIELDS: readonly FieldSpec[] = [
  { name: "second", min: 0, max: 59, last: 59 },
  { name: "minute", min: 0, max: 59, last: 59 },
  { name: "hour", min: 0, max: 23, last: 23 },
  { name: "day", min: 1, max: 31, last: 31 },
  { name: "month", min: 1, max: 12, last: 12, names: MONTH_NAMES },
  // 7 is accepted as a second spelling of Sunday and folded onto 0.
  { name: "day-of-week", min: 0, max: 7, last: 6, names: DAY_NAMES },
];

const MAX_DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
const MAX_DATE_MS = 8.64e15;

/**
 * Parses a timer schedule.
 *
 * NCRONTAB form: six whitespace-separated fields; each field is a comma list of `*`, `n`, `a-b`,
 * `*\/n`, `a-b/n` or `a/n` (from `a` to the field's maximum in steps of `n`). Months accept
 * `JAN`–`DEC` and days of week `SUN`–`SAT` (case-insensitive, three letters); day-of-week is 0–6
 * with 0 = Sunday, and 7 also means Sunday. Day and day-of-week combine as in Azure's NCrontab
 * library: a date must match both (so `0 0 8 1-7 * TUE` is the first Tuesday of each month), unlike
 * classic cron's either-or.
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
  if (parts.length !== FIELDS.length) {
    throw new Error(
      `invalid NCRONTAB expression "${expression}": expected 6 fields ` +
        `({second} {minute} {hour} {day} {month} {day-of-week}), got ${parts.length}`,
    );
  }
  const [second, minute, hour, day, month, dayOfWeek] = FIELDS.map((spec, i) =>
    parseField(expression, spec, parts[i]!),
  ) as [Field, Field, Field, Field, Field, Field];

  const dayMatches = (year: number, m: number, d: number): boolean => {
    const domOk = day.allowed[d] === true;
    const dowOk = dayOfWeek.allowed[new Date(utcMs(year, m, d, 0, 0, 0)).getUTCDay()] === true;
    return domOk && dowOk;
  };

  if (!month.values.some((m) => day.values.some((d) => d <= MAX_DAYS_IN_MONTH[m - 1]!))) {
    throw new Error(`invalid NCRONTAB expression "${expression}": the day and month fields never coincide`);
  }

  return {
    expression,
    next(after) {
      const start = after.getTime();
      if (Number.isNaN(start)) throw new Error("next() needs a valid date");
      const t = new Date(Math.floor(start / 1000) * 1000 + 1000);
      let year = t.getUTCFullYear();
      let mo = t.getUTCMonth() + 1;
      let d = t.getUTCDate();
      let h = t.getUTCHours();
      let mi = t.getUTCMinutes();
      let s = t.getUTCSeconds();
      // A schedule that passed the coincidence check fires within 28 years (the weekday cycle of
      // 29 February, e.g. a leap day that must also be a Monday); scan a little beyond that.
      const lastYear = year + 40;
      while (year <= lastYear) {
        const nextMonth = firstAtLeast(month.values, mo);
        if (nextMonth === undefined) {
          year++;
          [mo, d, h, mi, s] = [1, 1, 0, 0, 0];
          continue;
        }
        if (nextMonth !== mo) [mo, d, h, mi, s] = [nextMonth, 1, 0, 0, 0];

        const nextDay = firstMatchingDay(year, mo, d, dayMatches);
        if (nextDay === undefined) {
          [mo, d, h, mi, s] = [mo + 1, 1, 0, 0, 0];
          continue;
        }
        if (nextDay !== d) [d, h, mi, s] = [nextDay, 0, 0, 0];

        const nextHour = firstAtLeast(hour.values, h);
        if (nextHour === undefined) {
          [d, h, mi, s] = [d + 1, 0, 0, 0];
          continue;
        }
        if (nextHour !== h) [h, mi, s] = [nextHour, 0, 0];

        const nextMinute = firstAtLeast(minute.values, mi);
        if (nextMinute === undefined) {
          [h, mi, s] = [h + 1, 0, 0];
          continue;
        }
        if (nextMinute !== mi) [mi, s] = [nextMinute, 0];

        const nextSecond = firstAtLeast(second.values, s);
        if (nextSecond === undefined) {
          [mi, s] = [mi + 1, 0];
          continue;
        }
        const ms = utcMs(year, mo, d, h, mi, nextSecond);
        if (!(Math.abs(ms) <= MAX_DATE_MS)) break;
        return new Date(ms);
      }
      throw new Error(`NCRONTAB schedule "${expression}" has no occurrence after ${after.toISOString()}`);
    },
  };
}

/**
 * Whether a timer invocation is late: true when `now` is more than `toleranceMs` (default 1000 ms)
 * past the `scheduled` time. Feeds the `isPastDue` flag of the timer payload.
 */
export function isPastDue(scheduled: Date, now: Date, toleranceMs = 1000): boolean {
  return now.getTime() - scheduled.getTime() > toleranceMs;
}

function parseField(expression: string, spec: FieldSpec, text: string): Field {
  const fail = (reason: string): never => {
    throw new Error(`invalid NCRONTAB expression "${expression}": ${spec.name} field "${text}": ${reason}`);
  };
  const allowed: boolean[] = new Array<boolean>(spec.max + 1).fill(false);

  const value = (token: string): number => {
    if (/^\d+$/.test(token)) {
      const n = Number(token);
      if (n < spec.min || n > spec.max) fail(`${token} is out of range ${spec.min}-${spec.max}`);
      return n;
    }
    const index = spec.names?.indexOf(token.toUpperCase()) ?? -1;
    if (index === -1) fail(`"${token}" is not a valid value`);
    // Month names count from 1, day names from 0 (Sunday).
    return spec.name === "month" ? index + 1 : index;
  };

  for (const item of text.split(",")) {
    const slash = item.indexOf("/");
    const base = slash === -1 ? item : item.slice(0, slash);
    let step = 1;
    if (slash !== -1) {
      const stepText = item.slice(slash + 1);
      if (!/^\d+$/.test(stepText)) fail(`step "${stepText}" is not a number`);
      step = Number(stepText);
      if (step === 0) fail("step must be at least 1");
    }
    let from: number;
    let to: number;
    if (base === "*") {
      [from, to] = [spec.min, spec.last];
    } else if (base.includes("-")) {
      const [a = "", b = "", ...extra] = base.split("-");
      if (extra.length > 0 || a === "" || b === "") fail(`"${item}" is not a valid range`);
      [from, to] = [value(a), value(b)];
      if (from > to) fail(`range ${a}-${b} runs backwards`);
    } else if (base === "") {
      return fail(`empty value in "${text}"`);
    } else {
      from = value(base);
      to = slash === -1 ? from : Math.max(from, spec.last);
    }
    for (let v = from; v <= to; v += step) allowed[v] = true;
  }

  if (spec.name === "day-of-week" && allowed[7]) {
    allowed[0] = true;
    allowed[7] = false;
  }
  const values = allowed.flatMap((on, v) => (on ? [v] : []));
  const rangeSize = spec.last - spec.min + 1;
  return { values, allowed, restricted: values.length < rangeSize };
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

function firstAtLeast(values: readonly number[], from: number): number | undefined {
  return values.find((v) => v >= from);
}

function firstMatchingDay(
  year: number,
  month: number,
  from: number,
  matches: (year: number, month: number, day: number) => boolean,
): number | undefined {
  const last = new Date(utcMs(year, month + 1, 0, 0, 0, 0)).getUTCDate();
  for (let d = from; d <= last; d++) {
    if (matches(year, month, d)) return d;
  }
  return undefined;
}

/** Epoch milliseconds for a UTC calendar time; `month` is 1-based and may overflow like Date.UTC. */
function utcMs(year: number, month: number, day: number, hour: number, minute: number, second: number): number {
  const date = new Date(0);
  // setUTCFullYear, unlike Date.UTC, does not map years 0–99 onto 1900–1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, 0);
  return date.getTime();
}
