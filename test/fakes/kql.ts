/**
 * The part of the Kusto query language the console's `query_log` templates use, evaluated over
 * in-memory tables, so the Log Analytics fake answers what the query asks of its data instead of a
 * canned table: `let x = '…';`, a table or `union a, b`, `where` (`==`, `!=`, `<`, `<=`, `>`,
 * `>=`, `in (…)`, `and`, `or`), `summarize [name=]agg(…), … [by col, …]` (count, avg, min, max,
 * percentile by nearest rank), `order by col [asc|desc]`, `top N by col [asc|desc]`,
 * `project col, …` and `take N`. Anything else throws, which the fake answers as a 400 — a
 * template the fake does not understand is a test failure, not a silent empty table.
 */

export type Row = Record<string, unknown>;
export type Tables = Record<string, Row[]>;

export interface KqlResult {
  columns: { name: string; type: string }[];
  rows: unknown[][];
}

/** Splits on `sep` outside quotes and parentheses. */
function splitTop(text: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === quote) quote = undefined;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === "(") depth++;
    else if (c === ")") depth--;
    else if (depth === 0 && text.startsWith(sep, i)) {
      parts.push(text.slice(start, i));
      start = i + sep.length;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim()).filter((p) => p.length > 0);
}

function literal(token: string, lets: Record<string, unknown>, row?: Row): unknown {
  const t = token.trim();
  if (/^'.*'$|^".*"$/.test(t)) return t.slice(1, -1);
  if (/^-?\d+(\.\d+)?$/.test(t)) return Number(t);
  if (t === "true" || t === "false") return t === "true";
  if (t in lets) return lets[t];
  if (/^[A-Za-z_][\w]*$/.test(t)) return row?.[t];
  throw new Error(`unsupported operand ${t}`);
}

function compare(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return String(a ?? "").localeCompare(String(b ?? ""));
}

function predicate(expr: string, lets: Record<string, unknown>): (row: Row) => boolean {
  const ors = splitTop(expr, " or ");
  if (ors.length > 1) {
    const parts = ors.map((p) => predicate(p, lets));
    return (row) => parts.some((p) => p(row));
  }
  const ands = splitTop(expr, " and ");
  if (ands.length > 1) {
    const parts = ands.map((p) => predicate(p, lets));
    return (row) => parts.every((p) => p(row));
  }
  const inList = /^(\w+)\s+in\s+\((.*)\)$/.exec(expr);
  if (inList) {
    const values = splitTop(inList[2] ?? "", ",").map((v) => literal(v, lets));
    return (row) => values.includes(row[inList[1] ?? ""]);
  }
  const cmp = /^(.+?)\s*(==|!=|>=|<=|>|<)\s*(.+)$/.exec(expr);
  if (!cmp) throw new Error(`unsupported predicate ${expr}`);
  const [, left = "", op, right = ""] = cmp;
  return (row) => {
    const a = literal(left, lets, row);
    const b = literal(right, lets, row);
    if (a === undefined || a === null) return false;
    const c = compare(a, b);
    return op === "=="
      ? a === b
      : op === "!="
        ? a !== b
        : op === ">="
          ? c >= 0
          : op === "<="
            ? c <= 0
            : op === ">"
              ? c > 0
              : c < 0;
  };
}

function nearestRank(values: number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? null;
}

function aggregate(spec: string): { name: string; apply(rows: Row[]): unknown } {
  const named = /^(\w+)\s*=\s*(.+)$/.exec(spec);
  const call = /^(\w+)\((.*)\)$/.exec((named ? named[2] : spec)?.trim() ?? "");
  if (!call) throw new Error(`unsupported aggregation ${spec}`);
  const [, fn = "", argText = ""] = call;
  const args = splitTop(argText, ",");
  const column = args[0] ?? "";
  const numbers = (rows: Row[]) => rows.map((r) => r[column]).filter((v): v is number => typeof v === "number");
  const defaults: Record<string, string> = {
    count: "count_",
    avg: `avg_${column}`,
    min: `min_${column}`,
    max: `max_${column}`,
    percentile: `percentile_${column}_${args[1] ?? ""}`,
  };
  const name = named?.[1] ?? defaults[fn];
  if (!name) throw new Error(`unsupported aggregation ${fn}`);
  const pick = (rows: Row[], sign: 1 | -1) =>
    rows
      .map((r) => r[column])
      .filter((v) => v !== undefined && v !== null)
      .sort((a, b) => sign * compare(a, b))[0] ?? null;
  const apply: Record<string, (rows: Row[]) => unknown> = {
    count: (rows) => rows.length,
    avg: (rows) => (numbers(rows).length ? numbers(rows).reduce((s, v) => s + v, 0) / numbers(rows).length : null),
    min: (rows) => pick(rows, 1),
    max: (rows) => pick(rows, -1),
    percentile: (rows) => nearestRank(numbers(rows), Number(args[1])),
  };
  const f = apply[fn];
  if (!f) throw new Error(`unsupported aggregation ${fn}`);
  return { name, apply: f };
}

function typeOf(values: unknown[]): string {
  const v = values.find((x) => x !== null && x !== undefined);
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number")
    return values.every((x) => x === null || x === undefined || Number.isInteger(x)) ? "long" : "real";
  if (typeof v === "string" && /^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(v)) return "datetime";
  return "string";
}

/** Runs `query` over `tables`, keeping only rows whose `timestamp` is inside `timespan` (`start/end`). */
export function runKql(query: string, tables: Tables, timespan?: string): KqlResult {
  const lets: Record<string, unknown> = {};
  let body = query.trim();
  for (
    let m = /^let\s+(\w+)\s*=\s*('[^']*'|"[^"]*"|-?\d+)\s*;/.exec(body);
    m;
    m = /^let\s+(\w+)\s*=\s*('[^']*'|"[^"]*"|-?\d+)\s*;/.exec(body)
  ) {
    lets[m[1] ?? ""] = literal(m[2] ?? "", {});
    body = body.slice(m[0].length).trim();
  }
  const [source = "", ...stages] = splitTop(body, "|");
  const names = source.startsWith("union ") ? splitTop(source.slice(6), ",") : [source];
  const [from, to] = (timespan ?? "").split("/").map((t) => Date.parse(t));
  let columns: string[] = [];
  let rows: Row[] = [];
  for (const name of names) {
    const table = tables[name];
    if (!table) throw new Error(`unknown table ${name}`);
    for (const row of table) for (const key of Object.keys(row)) if (!columns.includes(key)) columns.push(key);
    rows.push(
      ...table.filter((r) => {
        if (from === undefined || to === undefined || Number.isNaN(from) || Number.isNaN(to)) return true;
        const at = Date.parse(String(r.timestamp));
        return at >= from && at <= to;
      }),
    );
  }
  for (const stage of stages) {
    const [verb = "", ...restWords] = stage.split(/\s+/);
    const rest = stage.slice(verb.length).trim();
    if (verb === "where") rows = rows.filter(predicate(rest, lets));
    else if (verb === "take") rows = rows.slice(0, Number(rest));
    else if (verb === "project") {
      columns = splitTop(rest, ",");
      rows = rows.map((r) => Object.fromEntries(columns.map((c) => [c, r[c]])));
    } else if (verb === "order" || verb === "top") {
      const m =
        verb === "order"
          ? /^by\s+(\w+)(?:\s+(asc|desc))?$/.exec(rest)
          : /^(\d+)\s+by\s+(\w+)(?:\s+(asc|desc))?$/.exec(rest);
      if (!m) throw new Error(`unsupported ${verb} ${rest}`);
      const [column, direction] = verb === "order" ? [m[1] ?? "", m[2]] : [m[2] ?? "", m[3]];
      const sign = direction === "asc" ? 1 : -1;
      rows = [...rows].sort((a, b) => sign * compare(a[column], b[column]));
      if (verb === "top") rows = rows.slice(0, Number(m[1]));
    } else if (verb === "summarize") {
      const [aggText = "", byText] = splitTop(rest, " by ");
      const aggs = splitTop(aggText, ",").map(aggregate);
      const keys = byText ? splitTop(byText, ",") : [];
      const groups = new Map<string, Row[]>();
      for (const r of rows) {
        const k = JSON.stringify(keys.map((c) => r[c]));
        groups.set(k, [...(groups.get(k) ?? []), r]);
      }
      if (keys.length === 0 && groups.size === 0) groups.set("[]", []);
      columns = [...keys, ...aggs.map((a) => a.name)];
      rows = [...groups.entries()].map(([k, members]) => {
        const keyValues = JSON.parse(k) as unknown[];
        return Object.fromEntries([
          ...keys.map((c, n) => [c, keyValues[n]]),
          ...aggs.map((a) => [a.name, a.apply(members)]),
        ]);
      });
    } else throw new Error(`unsupported operator ${verb} ${restWords.join(" ")}`);
  }
  return {
    columns: columns.map((name) => ({ name, type: typeOf(rows.map((r) => r[name])) })),
    rows: rows.map((r) => columns.map((c) => r[c] ?? null)),
  };
}
