import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The layering checks over the whole tree: no file takes part in an import cycle, and no two
 * folders of `shared/` import each other in a circle. Every kind of import counts: static,
 * type-only (`import type`, `export type ... from`), re-exports, dynamic `import()` and `import("x").T`
 * in type positions. A type-only cycle costs nothing at run time, but it still means neither module
 * can be read, moved or tested without the other.
 *
 * The parser is a small scanner over the source text (comments dropped) rather than the compiler's
 * API: the TypeScript this repository pins (7, the native compiler) has no JavaScript API, and the
 * import forms this codebase writes are few. Only relative specifiers are followed; package imports
 * cannot close a cycle inside the tree.
 */

const root = path.resolve(import.meta.dirname, "../..");
const ROOTS = ["functions", "shared", "jobapi", "local", "web/src", "test", "bench", "scripts"];
const SOURCE = /\.(ts|tsx|mts)$/;

function listSources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === "fixtures") continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listSources(full));
    else if (SOURCE.test(entry.name) && !entry.name.endsWith(".d.ts")) out.push(full);
  }
  return out;
}

/** Drops comments, keeping string literals (a `//` inside a URL string is not a comment). */
function stripComments(text: string): string {
  return text.replace(
    /("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|\/\*[\s\S]*?\*\/|\/\/[^\n]*/g,
    (m, str) => (str ? m : ""),
  );
}

/** The relative module specifiers a source imports, in any form. */
function importSpecifiers(text: string): string[] {
  const code = stripComments(text);
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+|;\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm;
  return [...code.matchAll(pattern)].map((m) => m[1] as string);
}

function resolveSpecifier(from: string, specifier: string): string | undefined {
  const base = path.resolve(path.dirname(from), specifier);
  const stem = base.replace(/\.(m?js|jsx)$/, "");
  for (const candidate of [
    `${stem}.ts`,
    `${stem}.tsx`,
    `${stem}.mts`,
    base,
    path.join(base, "index.ts"),
    path.join(base, "index.tsx"),
  ]) {
    if (existsSync(candidate) && statSync(candidate).isFile() && SOURCE.test(candidate)) return candidate;
  }
  return undefined;
}

/** The import graph of the tree: each source file (relative to the root) to the files it imports. */
function importGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  const files = ROOTS.flatMap((dir) => (existsSync(path.join(root, dir)) ? listSources(path.join(root, dir)) : []));
  for (const file of files) {
    const targets = new Set<string>();
    for (const specifier of importSpecifiers(readFileSync(file, "utf8"))) {
      const target = resolveSpecifier(file, specifier);
      if (target) targets.add(path.relative(root, target));
    }
    graph.set(path.relative(root, file), targets);
  }
  return graph;
}

/** The strongly connected components with more than one node, or a node importing itself (Tarjan). */
function cycles(graph: Map<string, Set<string>>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    indices.set(node, index);
    low.set(node, index);
    index += 1;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) as number, indices.get(next) as number));
      }
    }
    if (low.get(node) === indices.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || graph.get(node)?.has(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!indices.has(node)) visit(node);
  return found;
}

/** The folder of `shared/` a file belongs to (`shared/ops/verifier/verifier.ts` → `ops`), or undefined outside shared/. */
function sharedContext(file: string): string | undefined {
  const parts = file.split(path.sep);
  if (parts[0] !== "shared" || parts.length < 2) return undefined;
  return parts.length === 2 ? (parts[1] as string).replace(SOURCE, "") : parts[1];
}

describe("import layering", () => {
  const graph = importGraph();

  it("the scanner sees every import form: static, type-only, re-export, side effect, dynamic and import types", () => {
    const source = [
      'import type { A } from "./a.js";',
      'import { b } from "./b.js";',
      'export * from "./c.js";',
      'export type { F } from "./f.js";',
      'import "./g.js";',
      'const d = await import("./d.js");',
      'type E = import("./e.js").E;',
      "import {",
      "  h,",
      '} from "../h.js";',
      '// import { x } from "./commented.js";',
      'const url = "http://example.org/x"; import { i } from "./i.js";',
    ].join("\n");
    expect(importSpecifiers(source).sort()).toEqual(
      ["./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./f.js", "./g.js", "../h.js", "./i.js"].sort(),
    );
  });

  it("sees the tree: hundreds of files and the edges between them", () => {
    expect(graph.size).toBeGreaterThan(300);
    expect(graph.get(path.join("functions", "index.ts"))?.size).toBeGreaterThan(5);
  });

  it("no file import cycle anywhere in the tree (type-only and dynamic imports included)", () => {
    expect(cycles(graph)).toEqual([]);
  });

  it("no two folders of shared/ import each other in a circle (type-only imports included)", () => {
    const contexts = new Map<string, Set<string>>();
    for (const [file, targets] of graph) {
      const from = sharedContext(file);
      if (!from) continue;
      const edges = contexts.get(from) ?? new Set<string>();
      contexts.set(from, edges);
      for (const target of targets) {
        const to = sharedContext(target);
        if (to && to !== from) edges.add(to);
      }
    }
    const circles = cycles(contexts).map((component) => {
      // Name the files behind each edge inside the circle, so the failure says where to cut.
      const members = new Set(component);
      const edges: string[] = [];
      for (const [file, targets] of graph) {
        const from = sharedContext(file);
        if (!from || !members.has(from)) continue;
        for (const target of targets) {
          const to = sharedContext(target);
          if (to && to !== from && members.has(to)) edges.push(`${file} → ${target}`);
        }
      }
      return { contexts: component, edges };
    });
    expect(circles).toEqual([]);
  });
});
