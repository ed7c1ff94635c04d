import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalCluster, startLocalCluster } from "../../local/kube/cluster.js";
import { createLogger } from "../../shared/logging/logger.js";

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, "../..");
const dir = mkdtempSync(path.join(tmpdir(), "bp-k8s-dry-run-"));
let cluster: LocalCluster;

beforeAll(async () => {
  cluster = await startLocalCluster({
    logger: createLogger({ level: "warn" }),
    dataDir: dir,
    nodes: [],
    namespaces: ["blastplane"],
    images: [],
  });
});
afterAll(async () => {
  await cluster?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const kubectl = (...args: string[]) => run("kubectl", ["--kubeconfig", cluster.kubeconfigPath, ...args]);

describe("infra/k8s/ against the local Kubernetes API (kubectl apply --dry-run=server)", () => {
  it("every object of jobapi.yaml is accepted by the API server and nothing is stored", async () => {
    // The local server publishes no OpenAPI document, so kubectl's client-side schema check is off here;
    // test/unit/jobapi-image.test.ts validates every object against the Kubernetes schemas.
    const { stdout } = await kubectl(
      "apply",
      "--dry-run=server",
      "--validate=false",
      "-f",
      path.join(ROOT, "infra/k8s/jobapi.yaml"),
    );
    const lines = stdout.trim().split("\n");
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^namespace\/blastplane (configured|unchanged) \(server dry run\)$/),
        "serviceaccount/blastplane-jobapi created (server dry run)",
        "serviceaccount/blastplane-shard created (server dry run)",
        "role.rbac.authorization.k8s.io/blastplane-jobapi-shards created (server dry run)",
        "rolebinding.rbac.authorization.k8s.io/blastplane-jobapi-shards created (server dry run)",
        "clusterrole.rbac.authorization.k8s.io/blastplane-jobapi-nodes created (server dry run)",
        "clusterrolebinding.rbac.authorization.k8s.io/blastplane-jobapi-nodes created (server dry run)",
        "deployment.apps/blastplane-jobapi created (server dry run)",
        // The node-prep DaemonSet (the database cache folder on every BLAST node) and the pods' admission policy.
        "daemonset.apps/blastplane-node-prep created (server dry run)",
        "validatingadmissionpolicy.admissionregistration.k8s.io/blastplane-pods created (server dry run)",
        "validatingadmissionpolicybinding.admissionregistration.k8s.io/blastplane-pods created (server dry run)",
        "service/blastplane-jobapi created (server dry run)",
        "poddisruptionbudget.policy/blastplane-jobapi created (server dry run)",
        "networkpolicy.networking.k8s.io/blastplane-jobapi-ingress created (server dry run)",
        "ingress.networking.k8s.io/blastplane-terminal created (server dry run)",
      ]),
    );
    expect(lines).toHaveLength(15);
    const { stdout: after } = await kubectl("get", "deployments,serviceaccounts", "-n", "blastplane", "-o", "name");
    expect(after.trim()).toBe("");
    // The existing namespace was patched in a dry run only: kubectl's last-applied annotation is not on it.
    const { stdout: annotations } = await kubectl(
      "get",
      "namespace",
      "blastplane",
      "-o",
      "jsonpath={.metadata.annotations}",
    );
    expect(annotations).not.toContain("last-applied-configuration");
  });

  it("every object of terminal.yaml is accepted by the API server (its admission policy and binding too) and nothing is stored", async () => {
    const { stdout } = await kubectl(
      "apply",
      "--dry-run=server",
      "--validate=false",
      "-f",
      path.join(ROOT, "infra/k8s/terminal.yaml"),
    );
    expect(stdout.trim().split("\n")).toEqual([
      "serviceaccount/blastplane-terminal created (server dry run)",
      "secret/blastplane-terminal-token created (server dry run)",
      "role.rbac.authorization.k8s.io/blastplane-terminal created (server dry run)",
      "rolebinding.rbac.authorization.k8s.io/blastplane-terminal created (server dry run)",
      "validatingadmissionpolicy.admissionregistration.k8s.io/blastplane-terminal-exec created (server dry run)",
      "validatingadmissionpolicybinding.admissionregistration.k8s.io/blastplane-terminal-exec created (server dry run)",
    ]);
    const { stdout: after } = await kubectl(
      "get",
      "secrets,validatingadmissionpolicies,validatingadmissionpolicybindings",
      "-A",
      "-o",
      "name",
    );
    expect(after.trim()).toBe("");
  });
});
