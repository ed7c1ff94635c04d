import { z } from "zod";

/**
 * The one way a deployable reads its environment: a zod object of environment names parsed into a
 * typed, validated, frozen configuration, with one message format for every refusal
 * (`invalid configuration: NAME: problem; NAME2: problem`). The Functions app
 * (`load-config.ts`), the job API (`jobapi/config.ts`) and the local stack (`local/settings.ts`)
 * each declare their settings with the field helpers below and call {@link parseEnv} once.
 */

/**
 * Parse options of a schema parsed once per process (the settings, a catalog at start): without
 * zod's compiled fast path for objects, which costs far more to generate than one parse saves.
 */
export const ONE_OFF_PARSE = { jitless: true } as const;

/** Environment variables as a process sees them. */
export type Env = Readonly<Record<string, string | undefined>>;

/**
 * A configuration that cannot start: one `NAME: problem` per bad setting. Values are never
 * quoted, as settings such as connection strings carry secrets.
 */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration: ${problems.join("; ")}`);
    this.name = "ConfigError";
  }
}

/** A whole number from `min` to `max` (written in decimal). */
export function envInt(min: number, max: number) {
  const message = `must be a whole number from ${min} to ${max}`;
  return z
    .string()
    .regex(/^-?\d+$/, message)
    .transform(Number)
    .refine((n) => n >= min && n <= max, message);
}

/** A TCP port; 0 asks the system for a free one. */
export const envPort = () => envInt(0, 65_535);

/** A number from `min` to `max` (decimals allowed); with `minExclusive`, above `min`. */
export function envNumber(min: number, max: number, minExclusive = false) {
  const message = minExclusive
    ? `must be a number above ${min} and at most ${max}`
    : `must be a number from ${min} to ${max}`;
  return z
    .string()
    .regex(/^-?\d+(\.\d+)?$/, message)
    .transform(Number)
    .refine((n) => (minExclusive ? n > min : n >= min) && n <= max, message);
}

/**
 * A setting in a format of its own, read by `parse` (which throws an Error saying what is wrong);
 * its message becomes the setting's problem.
 */
export function envParsed<T>(parse: (text: string) => T) {
  return z.string().transform((text, ctx): T => {
    try {
      return parse(text);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
  });
}

/** An absolute http(s) URL. */
export function envUrl() {
  return z
    .string()
    .refine(
      (value) => URL.canParse(value) && /^https?:$/.test(new URL(value).protocol),
      "must be an absolute http(s) URL",
    );
}

/** A flag: `1`/`true` or `0`/`false`. */
export function envFlag() {
  return z
    .enum(["0", "1", "true", "false"], "must be 0, 1, true or false")
    .transform((value) => value === "1" || value === "true");
}

/** One of `values`. */
export function envEnum<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, `must be one of ${values.join(", ")}`);
}

/** The log levels every deployable accepts in `LOG_LEVEL`. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Parses `env` with `schema` (keys are environment names; each field carries its default) and
 * returns `build(values)` deeply frozen. An empty variable reads as unset (`NAME=` means the
 * default), as Azure app settings and shell exports often leave one empty. Throws
 * {@link ConfigError} naming every bad setting.
 */
export function parseEnv<S extends z.ZodObject, T extends object>(
  schema: S,
  env: Env,
  build: (values: z.output<S>) => T,
): T {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ""));
  const parsed = schema.safeParse(present, {
    // A missing required setting gets the same plain words whatever its type.
    error: (issue) => (issue.input === undefined ? "is required" : undefined),
    // Parsed once per process: compiling zod's fast path for each object (`new Function`) costs
    // several times the one parse it would speed up (decision 0016). Same result either way.
    jitless: ONE_OFF_PARSE.jitless,
  });
  if (!parsed.success) {
    // Problems in the order the schema declares its settings, whether a field or a refinement of the whole found them.
    const order = Object.keys(schema.shape);
    const rank = (issue: z.core.$ZodIssue) => order.indexOf(String(issue.path[0]));
    const issues = [...parsed.error.issues].sort((a, b) => rank(a) - rank(b));
    throw new ConfigError(issues.map((issue) => `${issue.path.map(String).join(".")}: ${issue.message}`));
  }
  return deepFreeze(build(parsed.data));
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
