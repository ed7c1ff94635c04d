import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const functionsDir = path.resolve(import.meta.dirname, "../../functions");
/** The wiring (composition roots, the route kit): the only modules of functions/ a trigger may import. */
const COMPOSITION = "composition/";

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
    // index.ts is the entry that loads every trigger (and the stream setup first of all).
    for (const file of [...modules.filter((name) => name !== "index.ts"), ...orchestrations]) {
      for (const target of localImports(file))
        if (!target.startsWith(COMPOSITION)) offending.push(`${file} imports ${target}`);
    }
    expect(offending).toEqual([]);
  });

  it("functions/*.ts are triggers only: each registers a function; the wiring lives in functions/composition/", () => {
    const modules = readdirSync(functionsDir).filter((name) => name.endsWith(".ts") && name !== "index.ts");
    const registers = /\b(?:app\.(?:http|timer|generic|setup)|df\.app\.\w+)\s*\(|\broute\s*\(/;
    const notTriggers = modules.filter((name) => !registers.test(readFileSync(path.join(functionsDir, name), "utf8")));
    expect(notTriggers).toEqual([]);
  });

  it("the composition does not import a trigger (wiring flows one way: triggers → composition → shared/)", () => {
    const composition = readdirSync(path.join(functionsDir, "composition")).map((name) => `${COMPOSITION}${name}`);
    const offending = composition.flatMap((file) =>
      localImports(file)
        .filter((target) => !target.startsWith(COMPOSITION))
        .map((target) => `${file} imports ${target}`),
    );
    expect(offending).toEqual([]);
  });
});
