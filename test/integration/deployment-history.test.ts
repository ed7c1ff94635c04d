import type { AccessToken } from "@azure/identity";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAzurite } from "../../local/azurite.js";
import { loadConsoleConfig } from "../../shared/console/console-config.js";
import { createArmDeploymentsProvider } from "../../shared/console/providers/azure-deployments.js";
import { createGitDeploymentsProvider } from "../../shared/console/providers/git-deployments.js";
import type { ConsoleProviders, DeploymentRecord } from "../../shared/console/providers/providers.js";
import type { ToolResult } from "../../shared/console/tools/tool.js";
import { type FakeArmDeployments, startFakeArmDeployments } from "../fakes/arm-deployments.js";
import { callerWith, consoleHarness } from "../support/console-harness.js";
import { prefixedTables, testAzurite } from "../support/service-fakes.js";

const SUBSCRIPTION = "11111111-2222-4333-8444-555555555555";
const HOUR = 3_600_000;
let azurite: RunningAzurite;
let arm: FakeArmDeployments;
let repo: string;
let counter = 0;
const now = Date.now();
const ago = (hours: number) => new Date(now - hours * HOUR).toISOString();

/** One commit in the test repository at a given time, touching `file`. */
function commit(file: string, subject: string, at: string) {
  mkdirSync(path.dirname(path.join(repo, file)), { recursive: true });
  writeFileSync(path.join(repo, file), `${subject}\n`);
  const env = {
    ...process.env,
    GIT_AUTHOR_DATE: at,
    GIT_COMMITTER_DATE: at,
    GIT_AUTHOR_NAME: "Dana Ops",
    GIT_AUTHOR_EMAIL: "dana@example.org",
    GIT_COMMITTER_NAME: "Dana Ops",
    GIT_COMMITTER_EMAIL: "dana@example.org",
  };
  execFileSync("git", ["-C", repo, "add", file], { env });
  execFileSync("git", ["-C", repo, "commit", "-q", "-m", subject], { env });
}

beforeAll(async () => {
  [azurite, arm] = await Promise.all([testAzurite(), startFakeArmDeployments(SUBSCRIPTION)]);
  repo = mkdtempSync(path.join(tmpdir(), "bp-deploy-repo-"));
  execFileSync("git", ["init", "-q", "-b", "main", repo]);
  commit("config/ops-rules.json", "config: older rule change", ago(30));
  commit("infra/k8s/jobapi.yaml", "infra: job API to 3 replicas", ago(3));
  commit("README.md", "docs: not a deployment", ago(2.5));
  const tagEnv = {
    ...process.env,
    GIT_COMMITTER_DATE: ago(1),
    GIT_COMMITTER_NAME: "Dana Ops",
    GIT_COMMITTER_EMAIL: "dana@example.org",
  };
  execFileSync("git", ["-C", repo, "tag", "-a", "v1.4.0", "-m", "release 1.4.0", "HEAD~1"], { env: tagEnv });
  arm.resourceGroups = {
    "rg-blast": [
      {
        name: "aks-upgrade",
        timestamp: ago(5),
        provisioningState: "Succeeded",
        parameters: { adminPassword: { value: "hunter2" } },
      },
      { name: "functions-app", timestamp: ago(1.5), provisioningState: "Failed", duration: "PT2M10S" },
      { name: "ancient", timestamp: ago(40), provisioningState: "Succeeded" },
    ],
  };
});
afterAll(async () => {
  await Promise.all([azurite?.stop(), arm?.close()]);
  if (repo) rmSync(repo, { recursive: true, force: true });
});

const credential = (token: string) => ({
  getToken: async (): Promise<AccessToken> => ({ token, expiresOnTimestamp: Date.now() + HOUR }),
});
const cloud = (token = arm.token, resourceGroup = "rg-blast") =>
  createArmDeploymentsProvider({
    subscriptionId: SUBSCRIPTION,
    resourceGroup,
    credential: credential(token),
    clientOptions: { endpoint: arm.url, tlsOptions: { ca: arm.ca }, retryOptions: { maxRetries: 0 } },
  });

function harness(providers: ConsoleProviders) {
  return consoleHarness(prefixedTables(azurite.connectionString, `dep${++counter}x${Date.now().toString(36)}`), {
    providers,
  });
}

interface Deployments {
  total: number;
  deployments: DeploymentRecord[];
  sources: Record<string, { status: string; count: number }>;
  coverage_gaps: string[];
}
async function deployments(h: ReturnType<typeof harness>, window = "24h"): Promise<Deployments> {
  const result: ToolResult | undefined = (
    await h.coordinator.handleTurn(callerWith("Reader"), { text: `query_deployments window=${window}` })
  ).tool_results[0];
  if (result?.status !== "ok") throw new Error(JSON.stringify(result));
  return result.data as Deployments;
}

describe("query_deployments: Git history, ARM deployments (the real SDK against a fake of ARM) and recorded deployments", () => {
  it("C-109: both Git and cloud deployment history are in one result, merged newest first, within the window", async () => {
    const h = harness({
      gitDeployments: createGitDeploymentsProvider({ repositoryDir: repo }),
      cloudDeployments: cloud(),
    });
    await h.events.record({
      idempotency_key: "deploy-jobapi-1",
      source: "jobapi",
      event_type: "deployment.completed",
      detected_at: ago(0.5),
      correlation_id: "c-1",
      resource_ref: "job_api/default",
    });
    const before = arm.requests.length;
    const data = await deployments(h);

    expect(data.coverage_gaps).toEqual([]);
    expect(data.sources).toMatchObject({
      git: { status: "ok", count: 2 },
      cloud: { status: "ok", count: 2 },
      control_plane: { status: "ok", count: 1 },
    });
    expect(data.deployments.map((d) => [d.source, d.kind, d.name])).toEqual([
      ["control_plane", "deployment.completed", "job_api/default"],
      ["git", "git.tag", "v1.4.0"],
      ["cloud", "arm.deployment", "functions-app"],
      ["git", "git.commit", expect.stringMatching(/^[0-9a-f]{12}$/)],
      ["cloud", "arm.deployment", "aks-upgrade"],
    ]);
    expect(data.deployments.map((d) => d.at)).toEqual([...data.deployments.map((d) => d.at)].sort().reverse());
    expect(data.deployments.find((d) => d.kind === "git.commit")?.detail).toMatchObject({
      subject: "infra: job API to 3 replicas",
      author: "Dana Ops",
    });
    expect(data.deployments.find((d) => d.name === "functions-app")?.detail).toMatchObject({
      provisioning_state: "Failed",
      duration: "PT2M10S",
    });
    // Parameters and resource ids stay in ARM.
    expect(JSON.stringify(data)).not.toMatch(/hunter2|11111111-2222/);
    // The SDK followed ARM's nextLink through every page, each call authorized.
    const calls = arm.requests.slice(before);
    expect(calls.map((c) => c.query.$skiptoken ?? "first")).toEqual(["first", "2"]);
    expect(
      calls.every(
        (c) =>
          c.authorized &&
          c.path.toLowerCase() ===
            `/subscriptions/${SUBSCRIPTION}/resourcegroups/rg-blast/providers/microsoft.resources/deployments`,
      ),
    ).toBe(true);

    // A longer window reaches the older commit and deployment.
    const week = await deployments(h, "168h");
    expect(week.deployments.map((d) => d.name)).toEqual(expect.arrayContaining(["ancient"]));
    expect(week.deployments.filter((d) => d.kind === "git.commit").map((d) => d.detail.subject)).toEqual([
      "infra: job API to 3 replicas",
      "config: older rule change",
    ]);
  });

  it("reports each source that is not configured, or cannot be read, as a gap and keeps the others' history", async () => {
    const none = await deployments(harness({}));
    expect(none.sources).toMatchObject({
      git: { status: "unavailable" },
      cloud: { status: "unavailable" },
      control_plane: { status: "ok" },
    });
    expect(none.coverage_gaps).toEqual([
      "git: no deployment repository is configured (SVC_DEPLOYMENTS_GIT_DIR)",
      "cloud: no resource group is configured (SVC_SUBSCRIPTION_ID with SVC_DEPLOYMENTS_RESOURCE_GROUP)",
    ]);

    const broken = await deployments(
      harness({
        gitDeployments: createGitDeploymentsProvider({ repositoryDir: path.join(repo, "missing") }),
        cloudDeployments: cloud(),
      }),
    );
    expect(broken.sources).toMatchObject({ git: { status: "unavailable" }, cloud: { status: "ok", count: 2 } });
    expect(broken.coverage_gaps).toEqual(["git: the deployment repository is not readable"]);

    const refused = await deployments(
      harness({
        gitDeployments: createGitDeploymentsProvider({ repositoryDir: repo }),
        cloudDeployments: cloud("wrong-token"),
      }),
    );
    expect(refused.sources).toMatchObject({ git: { status: "ok", count: 2 }, cloud: { status: "unavailable" } });
    expect(refused.coverage_gaps).toEqual(["cloud: the source could not be read"]);
    expect(JSON.stringify(refused)).not.toContain("InvalidAuthenticationToken");

    const notRepo = mkdtempSync(path.join(tmpdir(), "bp-not-repo-"));
    try {
      const plain = await deployments(
        harness({ gitDeployments: createGitDeploymentsProvider({ repositoryDir: notRepo }) }),
      );
      expect(plain.coverage_gaps[0]).toBe("git: the deployment repository could not be read");
    } finally {
      rmSync(notRepo, { recursive: true, force: true });
    }
  });

  it("the repository is a server setting: an absolute path, and the deployment resource group needs the subscription", () => {
    expect(() => createGitDeploymentsProvider({ repositoryDir: "relative/repo" })).toThrow(/absolute path/);
    expect(() => loadConsoleConfig({ SVC_DEPLOYMENTS_GIT_DIR: "repo; rm -rf /" })).toThrow(/SVC_DEPLOYMENTS_GIT_DIR/);
    expect(() => loadConsoleConfig({ SVC_DEPLOYMENTS_RESOURCE_GROUP: "rg-blast" })).toThrow(
      /SVC_DEPLOYMENTS_RESOURCE_GROUP/,
    );
    expect(
      loadConsoleConfig({
        SVC_DEPLOYMENTS_GIT_DIR: repo,
        SVC_SUBSCRIPTION_ID: SUBSCRIPTION,
        SVC_DEPLOYMENTS_RESOURCE_GROUP: "rg-blast",
      }),
    ).toMatchObject({ deploymentsGitDir: repo, deploymentsResourceGroup: "rg-blast" });
  });
});
