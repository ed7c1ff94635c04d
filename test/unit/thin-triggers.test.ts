import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const functionsDir = path.resolve(import.meta.dirname, "../../functions");
/** The composition roots (dashboard, console) and the route kit: the only modules of functions/ a trigger may import. */
const KIT = new Set(["app-context.ts", "http-route.ts", "dashboard-deps.ts", "console-deps.ts", "console-parts.ts"]);

/** The functions/ modules `file` imports (static, re-exported or dynamic), as paths relative to functions/. */
function localImports(file: string): string[] {
  const text = readFileSync(path.join(functionsDir, file), "utf8");
  const specifiers = [...text.matchAll(/(?:from\s+|import\s*\(\s*)["'](\.{1,2}\/[^"']+)["']/g)].map(
    (match) => match[1] as string,
  );
  return specifiers
    .map((specifier) =>
      path
        .relative(functionsDir, path.resolve(path.dirname(path.join(functionsDir, file)), specifier))
        .replace(/\.js$/, ".ts"),
    )
    .filter((target) => !target.startsWith(".."));
}

describe("thin triggers", () => {
  it("no trigger module imports another: triggers share names through shared/ and dependencies through the composition root", () => {
    const modules = readdirSync(functionsDir).filter((name) => name.endsWith(".ts"));
    const orchestrations = readdirSync(path.join(functionsDir, "orchestrations")).map(
      (name) => `orchestrations/${name}`,
    );
    const offending: string[] = [];
    // index.ts is the entry that loads every trigger; the kit modules are not triggers.
    for (const file of [...modules.filter((name) => name !== "index.ts" && !KIT.has(name)), ...orchestrations]) {
      for (const target of localImports(file)) if (!KIT.has(target)) offending.push(`${file} imports ${target}`);
    }
    expect(offending).toEqual([]);
  });
});
