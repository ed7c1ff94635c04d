import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevIdentityProvider, startDevIdentityProvider } from "../../local/dev-idp.js";

const root = path.resolve(import.meta.dirname, "../..");
const version = (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version;
const work = mkdtempSync(path.join(tmpdir(), "cli-"));
/** A data folder with no stack in it: what the commands see before `npm start`. */
const noStack = path.join(work, "empty");
mkdirSync(noStack);

afterAll(() => rmSync(work, { recursive: true, force: true }));

async function blastplane(
  args: string[],
  dataDir = noStack,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [path.join(root, "bin/blastplane.mjs"), ...args],
      {
        env: { ...process.env, BLASTPLANE_DATA_DIR: dataDir },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe("blastplane without a running stack", () => {
  it("--version prints the package's version (and a record with --json)", async () => {
    expect(await blastplane(["--version"])).toEqual({ code: 0, stdout: `blastplane ${version}\n`, stderr: "" });
    const json = await blastplane(["--version", "--json"]);
    expect(JSON.parse(json.stdout)).toEqual({ name: "blastplane", version });
  });

  it.each(["token", "api-token", "db", "console"])(
    "%s --help prints the command's usage, never looking for a stack",
    async (command) => {
      for (const args of [
        [command, "--help"],
        [command, "-h"],
        ["help", command],
      ]) {
        const run = await blastplane(args);
        expect(run, args.join(" ")).toMatchObject({ code: 0, stderr: "" });
        expect(run.stdout).toMatch(new RegExp(`^Usage:\\n  blastplane ${command} `));
        expect(run.stdout).toContain("--json");
      }
    },
  );

  it("the usage lists every command and --version; an unknown command is refused with it", async () => {
    const usage = await blastplane(["--help"]);
    for (const command of ["token", "api-token", "db add", "console", "--version"])
      expect(usage.stdout).toContain(`blastplane ${command}`);
    const unknown = await blastplane(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('Unknown command "frobnicate"');
  });

  it("a command that needs the stack says how to start one", async () => {
    const run = await blastplane(["api-token"]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("npm start");
  });
});

describe("blastplane --json against a stack's data folder", () => {
  let idp: DevIdentityProvider;
  const dataDir = path.join(work, "stack");
  const jobApiDir = path.join(dataDir, "jobapi");

  beforeAll(async () => {
    idp = await startDevIdentityProvider({ port: 0, clientId: "blastplane-local", tenantId: "blastplane-local" });
    mkdirSync(path.join(jobApiDir, "secrets"), { recursive: true });
    // The stack file as `npm start` writes it; this test process stands in for the stack's pid.
    writeFileSync(
      path.join(dataDir, "stack.json"),
      JSON.stringify({ pid: process.pid, idp_url: idp.url, jobapi_data_dir: jobApiDir }),
    );
    writeFileSync(
      path.join(jobApiDir, "secrets", "jobapi-api-token"),
      JSON.stringify({ current: { value: "tok-0123456789", created_at: "2026-11-27T10:00:00.000Z" } }),
    );
  });
  afterAll(async () => idp?.close());

  it("token --json prints the token record; without --json only the token", async () => {
    const json = await blastplane(["token", "--role", "Reader", "--name", "Ada", "--json"], dataDir);
    expect(json.code).toBe(0);
    const record = JSON.parse(json.stdout) as { access_token: string; token_type: string; expires_in: number };
    expect(record).toEqual({ access_token: expect.any(String), token_type: "Bearer", expires_in: expect.any(Number) });
    expect(record.access_token.split(".")).toHaveLength(3);
    const plain = await blastplane(["token", "--role", "Reader"], dataDir);
    expect(plain.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
  });

  it("api-token --json prints the token and when it was created", async () => {
    const json = await blastplane(["api-token", "--json"], dataDir);
    expect(JSON.parse(json.stdout)).toEqual({ api_token: "tok-0123456789", created_at: "2026-11-27T10:00:00.000Z" });
    expect((await blastplane(["api-token"], dataDir)).stdout).toBe("tok-0123456789\n");
  });
});
