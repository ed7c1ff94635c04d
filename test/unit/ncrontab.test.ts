import { describe, expect, it } from "vitest";
import { isPastDue, parseNcrontab } from "../../shared/config/ncrontab.js";

/** ISO strings of the first `count` occurrences after `after`. */
function occurrences(expression: string, after: string, count: number): string[] {
  const schedule = parseNcrontab(expression);
  const out: string[] = [];
  let t = new Date(after);
  for (let i = 0; i < count; i++) {
    t = schedule.next(t);
    out.push(t.toISOString());
  }
  return out;
}

const next = (expression: string, after: string) => parseNcrontab(expression).next(new Date(after)).toISOString();

describe("parseNcrontab: basic fields", () => {
  it("keeps the expression as given", () => {
    expect(parseNcrontab("0 */5 * * * *").expression).toBe("0 */5 * * * *");
  });

  it("fires every five minutes on the minute boundary", () => {
    expect(next("0 */5 * * * *", "2026-01-01T00:02:30Z")).toBe("2026-01-01T00:05:00.000Z");
    expect(occurrences("0 */5 * * * *", "2026-01-01T00:55:00Z", 3)).toEqual([
      "2026-01-01T01:00:00.000Z",
      "2026-01-01T01:05:00.000Z",
      "2026-01-01T01:10:00.000Z",
    ]);
  });

  it("returns a time strictly after the given one", () => {
    expect(next("* * * * * *", "2026-01-01T00:00:00Z")).toBe("2026-01-01T00:00:01.000Z");
    expect(next("0 0 * * * *", "2026-01-01T10:00:00Z")).toBe("2026-01-01T11:00:00.000Z");
  });

  it("drops milliseconds and moves to the next whole second", () => {
    expect(next("* * * * * *", "2026-01-01T00:00:00.500Z")).toBe("2026-01-01T00:00:01.000Z");
    expect(next("0 * * * * *", "2026-01-01T00:00:59.999Z")).toBe("2026-01-01T00:01:00.000Z");
  });

  it("honours the seconds field", () => {
    expect(occurrences("15,45 * * * * *", "2026-01-01T00:00:20Z", 3)).toEqual([
      "2026-01-01T00:00:45.000Z",
      "2026-01-01T00:01:15.000Z",
      "2026-01-01T00:01:45.000Z",
    ]);
  });

  it("supports ranges with a step", () => {
    expect(occurrences("0 10-30/10 * * * *", "2026-01-01T00:00:00Z", 4)).toEqual([
      "2026-01-01T00:10:00.000Z",
      "2026-01-01T00:20:00.000Z",
      "2026-01-01T00:30:00.000Z",
      "2026-01-01T01:10:00.000Z",
    ]);
  });

  it("supports a/n as a start value with a step up to the maximum", () => {
    expect(occurrences("0 45/10 * * * *", "2026-01-01T00:00:00Z", 3)).toEqual([
      "2026-01-01T00:45:00.000Z",
      "2026-01-01T00:55:00.000Z",
      "2026-01-01T01:45:00.000Z",
    ]);
  });

  it("supports lists, including a mix of values and ranges", () => {
    expect(occurrences("0 0 6,18 * * *", "2026-01-01T07:00:00Z", 3)).toEqual([
      "2026-01-01T18:00:00.000Z",
      "2026-01-02T06:00:00.000Z",
      "2026-01-02T18:00:00.000Z",
    ]);
    expect(occurrences("0 0 1-2,22 * * *", "2026-01-01T03:00:00Z", 3)).toEqual([
      "2026-01-01T22:00:00.000Z",
      "2026-01-02T01:00:00.000Z",
      "2026-01-02T02:00:00.000Z",
    ]);
  });

  it("accepts any whitespace between fields", () => {
    expect(next("  0\t*/5  * * * *  ", "2026-01-01T00:02:30Z")).toBe("2026-01-01T00:05:00.000Z");
  });

  it("rolls over to the next day after the last hour", () => {
    expect(next("0 0 23 * * *", "2026-01-01T23:00:00Z")).toBe("2026-01-02T23:00:00.000Z");
  });
});

describe("parseNcrontab: days of week", () => {
  it("skips the weekend for MON-FRI", () => {
    // 2026-01-02 is a Friday.
    expect(occurrences("0 30 9 * * MON-FRI", "2026-01-02T10:00:00Z", 2)).toEqual([
      "2026-01-05T09:30:00.000Z",
      "2026-01-06T09:30:00.000Z",
    ]);
    expect(next("0 30 9 * * 1-5", "2026-01-02T09:00:00Z")).toBe("2026-01-02T09:30:00.000Z");
  });

  it("reads day names case-insensitively", () => {
    expect(next("0 0 0 * * sun", "2026-01-01T00:00:00Z")).toBe("2026-01-04T00:00:00.000Z");
    expect(next("0 0 0 * * Sat,sUn", "2026-01-01T00:00:00Z")).toBe("2026-01-03T00:00:00.000Z");
  });

  it("treats both 0 and 7 as Sunday", () => {
    expect(next("0 0 0 * * 0", "2026-01-01T00:00:00Z")).toBe("2026-01-04T00:00:00.000Z");
    expect(next("0 0 0 * * 7", "2026-01-01T00:00:00Z")).toBe("2026-01-04T00:00:00.000Z");
    expect(occurrences("0 0 0 * * 5-7", "2026-01-01T00:00:00Z", 4)).toEqual([
      "2026-01-02T00:00:00.000Z",
      "2026-01-03T00:00:00.000Z",
      "2026-01-04T00:00:00.000Z",
      "2026-01-09T00:00:00.000Z",
    ]);
  });

  it("steps day-of-week from Sunday to Saturday without repeating Sunday", () => {
    expect(occurrences("0 0 0 * * */3", "2026-01-01T00:00:00Z", 4)).toEqual([
      "2026-01-03T00:00:00.000Z", // Saturday (6)
      "2026-01-04T00:00:00.000Z", // Sunday (0)
      "2026-01-07T00:00:00.000Z", // Wednesday (3)
      "2026-01-10T00:00:00.000Z",
    ]);
  });
});

describe("parseNcrontab: day-of-month and day-of-week combination", () => {
  it("applies only day-of-week when day-of-month is *", () => {
    expect(occurrences("0 0 0 * * FRI", "2026-01-01T00:00:00Z", 2)).toEqual([
      "2026-01-02T00:00:00.000Z",
      "2026-01-09T00:00:00.000Z",
    ]);
  });

  it("applies only day-of-month when day-of-week is *", () => {
    expect(occurrences("0 0 0 13 * *", "2026-01-01T00:00:00Z", 2)).toEqual([
      "2026-01-13T00:00:00.000Z",
      "2026-02-13T00:00:00.000Z",
    ]);
  });

  it("fires only when both day fields match, as Azure's NCrontab does", () => {
    // Friday the 13th.
    expect(occurrences("0 0 0 13 * FRI", "2026-01-01T00:00:00Z", 3)).toEqual([
      "2026-02-13T00:00:00.000Z",
      "2026-03-13T00:00:00.000Z",
      "2026-11-13T00:00:00.000Z",
    ]);
    // The 1st of a month that falls on a Monday.
    expect(occurrences("0 0 0 1 * MON", "2026-01-25T00:00:00Z", 2)).toEqual([
      "2026-06-01T00:00:00.000Z",
      "2027-02-01T00:00:00.000Z",
    ]);
  });

  it("treats a field covering its whole range as unrestricted", () => {
    expect(occurrences("0 0 0 1-31 * MON", "2026-01-01T00:00:00Z", 2)).toEqual([
      "2026-01-05T00:00:00.000Z",
      "2026-01-12T00:00:00.000Z",
    ]);
    expect(occurrences("0 0 0 13 * 0-7", "2026-01-01T00:00:00Z", 1)).toEqual(["2026-01-13T00:00:00.000Z"]);
  });

  it("rejects an impossible day-of-month even with a day-of-week, since both must match", () => {
    expect(() => parseNcrontab("0 0 0 30 2 MON")).toThrow(/never coincide/);
  });

  it("finds a leap day that is also a Monday", () => {
    expect(next("0 0 0 29 2 MON", "2026-01-01T00:00:00Z")).toBe("2044-02-29T00:00:00.000Z");
  });
});

describe("parseNcrontab: months, month ends and years", () => {
  it("reads month names and ranges of them case-insensitively", () => {
    expect(next("0 0 12 1 JAN,jul *", "2026-02-01T00:00:00Z")).toBe("2026-07-01T12:00:00.000Z");
    expect(occurrences("0 0 0 1 mar-May *", "2026-01-01T00:00:00Z", 4)).toEqual([
      "2026-03-01T00:00:00.000Z",
      "2026-04-01T00:00:00.000Z",
      "2026-05-01T00:00:00.000Z",
      "2027-03-01T00:00:00.000Z",
    ]);
  });

  it("skips months without the requested day", () => {
    expect(occurrences("0 0 0 31 * *", "2026-01-31T00:00:00Z", 3)).toEqual([
      "2026-03-31T00:00:00.000Z",
      "2026-05-31T00:00:00.000Z",
      "2026-07-31T00:00:00.000Z",
    ]);
  });

  it("rolls over from the last second of a month", () => {
    expect(next("* * * * * *", "2026-04-30T23:59:59Z")).toBe("2026-05-01T00:00:00.000Z");
  });

  it("rolls over the end of the year", () => {
    expect(next("0 0 0 * * *", "2026-12-31T12:00:00Z")).toBe("2027-01-01T00:00:00.000Z");
    expect(next("59 59 23 31 12 *", "2026-12-31T23:59:59Z")).toBe("2027-12-31T23:59:59.000Z");
    expect(next("0 0 0 1 1 *", "2026-06-01T00:00:00Z")).toBe("2027-01-01T00:00:00.000Z");
  });

  // The running time of these two (a small multiple of a daily schedule's) is measured in
  // bench/parsers.ts, not here (no timing assertions in tests).
  it("finds 29 February in the next leap year", () => {
    expect(next("0 0 0 29 2 *", "2025-01-01T00:00:00Z")).toBe("2028-02-29T00:00:00.000Z");
    expect(next("0 0 0 29 2 *", "2028-02-29T00:00:00Z")).toBe("2032-02-29T00:00:00.000Z");
    // 2100 is not a leap year, so the gap is eight years.
    expect(next("0 0 0 29 2 *", "2096-03-01T00:00:00Z")).toBe("2104-02-29T00:00:00.000Z");
  });

  it("computes many consecutive occurrences", () => {
    const schedule = parseNcrontab("0 0 0 29 2 *");
    let t = new Date("2000-01-01T00:00:00Z");
    for (let i = 0; i < 100; i++) t = schedule.next(t);
    // 2000–2400 hold 98 leap years (2100, 2200 and 2300 are not), so the 100th is 2408.
    expect(t.toISOString()).toBe("2408-02-29T00:00:00.000Z");
  });

  it("rejects an invalid date passed to next()", () => {
    expect(() => parseNcrontab("* * * * * *").next(new Date(Number.NaN))).toThrow(/valid date/);
  });
});

describe("parseNcrontab: TimeSpan form", () => {
  it("fires every interval after the given time", () => {
    expect(next("00:05:00", "2026-01-01T00:02:30Z")).toBe("2026-01-01T00:07:30.000Z");
    expect(next("01:00:00", "2026-01-01T00:00:00Z")).toBe("2026-01-01T01:00:00.000Z");
    expect(next("00:00:30", "2026-01-01T00:00:00.250Z")).toBe("2026-01-01T00:00:30.250Z");
  });

  it("reads d.hh:mm:ss and hh:mm", () => {
    expect(next("1.00:00:00", "2026-01-01T00:00:00Z")).toBe("2026-01-02T00:00:00.000Z");
    expect(next("2.03:04:05", "2026-01-01T00:00:00Z")).toBe("2026-01-03T03:04:05.000Z");
    expect(next("00:05", "2026-01-01T00:00:00Z")).toBe("2026-01-01T00:05:00.000Z");
  });

  it("reads a first number of 24 or more as days (dd:hh:mm)", () => {
    expect(next("25:00:00", "2026-01-01T00:00:00Z")).toBe("2026-01-26T00:00:00.000Z");
    expect(next("24:01:30", "2026-01-01T00:00:00Z")).toBe("2026-01-25T01:30:00.000Z");
  });

  it("keeps the expression as given", () => {
    expect(parseNcrontab("00:05:00").expression).toBe("00:05:00");
  });

  it.each([
    ["00:00:00", /greater than zero/],
    ["00:60:00", /minutes 60 out of range/],
    ["00:00:60", /seconds 60 out of range/],
    ["1.24:00:00", /hours 24 out of range/],
    ["25:30:00", /hours 30 out of range/],
    ["1:2:3:4", /expected hh:mm:ss/],
    ["1..00:00", /expected hh:mm:ss/],
  ])("rejects %s", (expression, message) => {
    expect(() => parseNcrontab(expression)).toThrow(message);
  });
});

describe("parseNcrontab: invalid expressions", () => {
  it.each([
    ["*/5 * * * *", /expected 6 fields .* got 5/],
    ["0 * * * * * *", /expected 6 fields .* got 7/],
    ["", /expected 6 fields .* got 0/],
    ["60 * * * * *", /second field "60": 60 is out of range 0-59/],
    ["* 60 * * * *", /minute field "60": 60 is out of range 0-59/],
    ["* * 24 * * *", /hour field "24": 24 is out of range 0-23/],
    ["* * * 0 * *", /day field "0": 0 is out of range 1-31/],
    ["* * * 32 * *", /day field "32": 32 is out of range 1-31/],
    ["* * * * 0 *", /month field "0": 0 is out of range 1-12/],
    ["* * * * 13 *", /month field "13": 13 is out of range 1-12/],
    ["* * * * * 8", /day-of-week field "8": 8 is out of range 0-7/],
    ["*/0 * * * * *", /second field "\*\/0": .*illegal stepping/],
    ["0 1-10/0 * * * *", /minute field "1-10\/0": .*illegal stepping/],
    ["0 */x * * * *", /minute field "\*\/x": .*illegal characters/],
    ["0 */ * * * *", /minute field "\*\/": .*illegal stepping/],
    ["abc * * * * *", /second field "abc": .*illegal characters/],
    ["0 0 0 * FOO *", /month field "FOO": .*illegal characters/],
    ["0 0 0 * * MONDAY", /day-of-week field "MONDAY": .*has to stand alone/],
    ["0 0 0 JAN * *", /day field "JAN": .*illegal characters/],
    ["0 0 0 * * MON-", /day-of-week field "MON-": .*illegal upper range/],
    ["0 0 0 * * 1-2-3", /day-of-week field "1-2-3": .*illegal range/],
    ["0 30-10 * * * *", /minute field "30-10": .*larger than/],
    ["0 0 0 * * FRI-MON", /day-of-week field "FRI-MON": .*larger than/],
    ["0 ,5 * * * *", /minute field ",5": empty value/],
    ["0 5, * * * *", /minute field "5,": empty value/],
    ["0 -5 * * * *", /minute field "-5": .*illegal lower range/],
    ["0 1.5 * * * *", /minute field "1.5": .*illegal characters/],
    ["0 0 0 30 2 *", /day and month fields never coincide/],
    ["0 0 0 31 4,6,9,11 *", /day and month fields never coincide/],
    // croner's extensions, which Azure's NCRONTAB does not have.
    ["0 0 0 L * *", /day field "L": "L", "W", "#" and "\?" are not NCRONTAB/],
    ["0 0 0 15W * *", /day field "15W": "L", "W", "#" and "\?" are not NCRONTAB/],
    ["0 0 0 ? * *", /day field "\?": "L", "W", "#" and "\?" are not NCRONTAB/],
    ["0 0 0 * * 5#2", /day-of-week field "5#2": "L", "W", "#" and "\?" are not NCRONTAB/],
    ["0 0 0 * * 5L", /day-of-week field "5L": "L", "W", "#" and "\?" are not NCRONTAB/],
    ["0 0 0 * * * 2030", /expected 6 fields .* got 7/],
    ["@daily", /expected 6 fields .* got 1/],
  ])("rejects %j", (expression, message) => {
    expect(() => parseNcrontab(expression)).toThrow(message);
  });

  it("keeps the letters of month and day names, which are not croner's L and W", () => {
    expect(parseNcrontab("0 0 0 * JUL WED").next(new Date("2026-01-01T00:00:00Z"))).toEqual(
      new Date("2026-07-01T00:00:00Z"),
    );
  });

  it("names the whole expression in the error", () => {
    expect(() => parseNcrontab("0 0 0 30 2 *")).toThrow('invalid NCRONTAB expression "0 0 0 30 2 *"');
  });
});

describe("isPastDue", () => {
  const scheduled = new Date("2026-01-01T00:00:00Z");

  it("is false on time and within the default one-second tolerance", () => {
    expect(isPastDue(scheduled, new Date("2025-12-31T23:59:59Z"))).toBe(false);
    expect(isPastDue(scheduled, scheduled)).toBe(false);
    expect(isPastDue(scheduled, new Date("2026-01-01T00:00:01.000Z"))).toBe(false);
  });

  it("is true once now is later than the tolerance", () => {
    expect(isPastDue(scheduled, new Date("2026-01-01T00:00:01.001Z"))).toBe(true);
  });

  it("honours a custom tolerance", () => {
    expect(isPastDue(scheduled, new Date("2026-01-01T00:00:00.100Z"), 50)).toBe(true);
    expect(isPastDue(scheduled, new Date("2026-01-01T00:00:30Z"), 60_000)).toBe(false);
    expect(isPastDue(scheduled, new Date("2026-01-01T00:00:00.001Z"), 0)).toBe(true);
  });
});
