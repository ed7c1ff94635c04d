/**
 * The canonical verb parser: `tool key=value key="quoted value" key={json}` or `tool {json}`.
 * It only splits text into a verb and raw arguments; each tool re-validates them with its schema.
 */

/** A parsed command, or why the text is not one. */
export type ParsedCommand =
  | { ok: true; verb: string; args: Record<string, unknown> }
  | { ok: false; verb: string; error: string };

/** The first word when it looks like a verb (snake_case), else undefined. */
export function leadingVerb(text: string): string | undefined {
  const match = /^\s*([a-z][a-z0-9_]*)(?=\s|$|\{)/.exec(text);
  return match?.[1];
}

/** Reads a balanced JSON object or array starting at `start`; returns its end offset (exclusive). */
function balancedEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/**
 * Parses `text` into a verb and arguments. `jsonArg` names the argument a bare JSON object fills
 * (`describe_event {…}` → `{ payload: {…} }`). Values stay strings unless given as JSON objects,
 * arrays or quoted strings; tools coerce with their schemas.
 */
export function parseCommand(text: string, jsonArg?: string): ParsedCommand {
  const verb = leadingVerb(text) ?? "";
  let rest = text.trim().slice(verb.length).trim();
  const args: Record<string, unknown> = {};
  if (rest.startsWith("{")) {
    try {
      const value = JSON.parse(rest) as unknown;
      if (!value || typeof value !== "object" || Array.isArray(value))
        return { ok: false, verb, error: "the JSON argument must be an object" };
      // Wrapped unless it already is `{ "<jsonArg>": … }` alone (an event may have its own `payload` field).
      const wrapped = jsonArg !== undefined && !(Object.keys(value).length === 1 && jsonArg in value);
      return { ok: true, verb, args: wrapped ? { [jsonArg]: value } : (value as Record<string, unknown>) };
    } catch {
      return { ok: false, verb, error: "the JSON argument is not valid JSON" };
    }
  }
  while (rest.length > 0) {
    const key = /^([a-z][a-z0-9_]*)=/.exec(rest);
    if (!key?.[1]) return { ok: false, verb, error: `expected key=value at "${rest.slice(0, 40)}"` };
    const name = key[1];
    rest = rest.slice(key[0].length);
    let value: unknown;
    if (rest.startsWith("{") || rest.startsWith("[")) {
      const end = balancedEnd(rest, 0);
      if (end < 0) return { ok: false, verb, error: `the value of ${name} is not closed` };
      try {
        value = JSON.parse(rest.slice(0, end));
      } catch {
        return { ok: false, verb, error: `the value of ${name} is not valid JSON` };
      }
      rest = rest.slice(end);
    } else if (rest.startsWith('"')) {
      const match = /^"((?:[^"\\]|\\.)*)"/.exec(rest);
      if (!match) return { ok: false, verb, error: `the value of ${name} is not closed` };
      value = JSON.parse(match[0]) as string;
      rest = rest.slice(match[0].length);
    } else {
      const match = /^\S*/.exec(rest);
      value = match?.[0] ?? "";
      rest = rest.slice(String(value).length);
    }
    if (name in args) return { ok: false, verb, error: `${name} is given twice` };
    args[name] = value;
    if (rest.length > 0 && !/^\s/.test(rest)) return { ok: false, verb, error: `expected a space after ${name}` };
    rest = rest.trim();
  }
  return { ok: true, verb, args };
}
