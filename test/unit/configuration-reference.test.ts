import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  collectSections,
  DOC_PATH,
  formatDefault,
  generatedBlock,
  generateReference,
  scanEnvironmentNames,
  undocumentedSettings,
  withReference,
} from "../../scripts/config-reference.js";

const root = path.resolve(".");
const doc = readFileSync(path.join(root, DOC_PATH), "utf8");
const generated = generateReference(root);

describe("the configuration reference (docs/configuration.md)", () => {
  it("lists every setting the code reads, exactly as generated from the settings schemas", () => {
    const missing = undocumentedSettings(doc, generated.names);
    expect(missing, `settings the code reads but ${DOC_PATH} does not list: run npm run docs:config`).toEqual([]);
    expect(generatedBlock(doc), `${DOC_PATH} is out of date: run npm run docs:config`).toBe(generated.block);
  });

  it("names a setting that a schema declares and the document lacks", () => {
    const withoutRow = doc.replace(/^\| `JOBAPI_DISPATCH_LEASE_SECONDS` \|.*\n/m, "");
    expect(withoutRow).not.toBe(doc);
    expect(undocumentedSettings(withoutRow, generated.names)).toEqual(["JOBAPI_DISPATCH_LEASE_SECONDS"]);
  });

  it("takes names, requiredness and defaults from the schema, and meanings from the descriptions", () => {
    const schema = z.object({
      NEW_REQUIRED: z.string(),
      NEW_OPTIONAL: z.string().optional(),
      NEW_SECONDS: z.string().transform(Number).default(30),
      NEW_LIMIT_BYTES: z
        .string()
        .transform(Number)
        .default(12 * 1024 ** 2),
      NEW_FLAG: z
        .enum(["0", "1"])
        .transform((v) => v === "1")
        .default(false),
    });
    const [section] = collectSections({ NEW_SECONDS: { meaning: "How long." } }, [
      { id: "x", heading: "X", intro: "", schemas: [schema] },
    ]);
    expect(section?.rows).toEqual([
      { name: "NEW_REQUIRED", defaultText: "required", meaning: undefined },
      { name: "NEW_OPTIONAL", defaultText: "—", meaning: undefined },
      { name: "NEW_SECONDS", defaultText: "`30`", meaning: "How long." },
      { name: "NEW_LIMIT_BYTES", defaultText: "12 MiB", meaning: undefined },
      { name: "NEW_FLAG", defaultText: "`0`", meaning: undefined },
    ]);
    expect(formatDefault("X", { a: "b", c: "d" })).toBe("`a=b,c=d`");
    expect(formatDefault("X", [])).toBe("none");
  });

  describe("settings read straight from the environment", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "bp-config-scan-"));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    it("are found in the source, whatever the spelling of the read, system variables aside", () => {
      mkdirSync(path.join(dir, "bin"));
      writeFileSync(
        path.join(dir, "bin", "tool.mjs"),
        [
          "const a = process.env.BLASTPLANE_NEW_KNOB;",
          'const b = process.env["SVC_OTHER"];',
          'const c = env["JOBAPI_THIRD"] ?? env.SHARD_FOURTH;',
          "const d = process.env.PATH;",
        ].join("\n"),
      );
      expect(scanEnvironmentNames(dir, ["bin"])).toEqual([
        "BLASTPLANE_NEW_KNOB",
        "JOBAPI_THIRD",
        "SHARD_FOURTH",
        "SVC_OTHER",
      ]);
    });
  });

  it("replaces only the generated block when regenerated", () => {
    const replaced = withReference(doc, generated.block);
    expect(replaced).toBe(doc.replace(generatedBlock(doc) ?? "", generated.block));
    expect(withReference("# Title\n", "BLOCK")).toBe("# Title\n\nBLOCK\n");
  });
});
