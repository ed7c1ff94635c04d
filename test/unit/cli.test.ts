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

  it.each(["token", "api-token", "env", "db", "console", "notifications", "notify"])(
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
    for (const command of ["token", "api-token", "env", "db add", "console", "--version"])
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
  /** A path a shell must quote (a space and a quote in it). */
  const kubeconfigPath = path.join(dataDir, "kube config", "it's");

  beforeAll(async () => {
    idp = await startDevIdentityProvider({ port: 0, clientId: "blastplane-local", tenantId: "blastplane-local" });
    mkdirSync(path.join(jobApiDir, "secrets"), { recursive: true });
    // The stack file as `npm start` writes it; this test process stands in for the stack's pid.
    writeFileSync(
      path.join(dataDir, "stack.json"),
      JSON.stringify({
        pid: process.pid,
        functions_url: "http://127.0.0.1:41234",
        idp_url: idp.url,
        jobapi_url: "http://127.0.0.1:41235",
        jobapi_data_dir: jobApiDir,
        kubeconfig: kubeconfigPath,
      }),
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

  it("issue 23 item 10: env prints exports a shell evaluates into the stack's addresses, quoted where needed", async () => {
    const run = await blastplane(["env"], dataDir);
    expect(run).toMatchObject({ code: 0, stderr: "" });
    expect(run.stdout).toMatch(
      /^export DASHBOARD=http:\/\/127\.0\.0\.1:41234 JOBAPI=http:\/\/127\.0\.0\.1:41235 KUBECONFIG='/,
    );
    const evaluated = await new Promise<string>((resolve, reject) => {
      const script = `eval "$(cat)"; printf '%s\\n' "$DASHBOARD" "$JOBAPI" "$KUBECONFIG" "$BLASTPLANE_DATA_DIR"`;
      const child = execFile("bash", ["-c", script], (error, stdout) => (error ? reject(error) : resolve(stdout)));
      child.stdin?.end(run.stdout);
    });
    expect(evaluated.split("\n").slice(0, 4)).toEqual([
      "http://127.0.0.1:41234",
      "http://127.0.0.1:41235",
      kubeconfigPath,
      dataDir,
    ]);
    expect(JSON.parse((await blastplane(["env", "--json"], dataDir)).stdout)).toEqual({
      DASHBOARD: "http://127.0.0.1:41234",
      JOBAPI: "http://127.0.0.1:41235",
      KUBECONFIG: kubeconfigPath,
      BLASTPLANE_DATA_DIR: dataDir,
    });
  });
});
