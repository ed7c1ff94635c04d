import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { azureStandIns } from "../../local/kube/azure-stand-ins.js";
import type { KubeObject } from "../../local/kube/selectors.js";
import {
  deploymentOf,
  jobApiServiceAccountName,
  renderJobApiManifests,
} from "../../shared/cluster/job-api-manifests.js";
import { API_TOKEN_SECRET } from "../../shared/secrets/api-tokens.js";
import { sampleJobApiValues } from "../support/job-api-values.js";

/*
 * The one place a job API deployed to the local cluster differs from one deployed to AKS: the
 * manifests are rendered for Azure (and stay so), and the local kubelet swaps what Azure would
 * supply the container for what the local stack has.
 */
const root = mkdtempSync(path.join(tmpdir(), "bp-stand-ins-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const AZURITE = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;";
const DISCOVERY = "http://127.0.0.1:9/tenant/v2.0/.well-known/openid-configuration";

/** The job API's pod as rendered for AKS, and its container's literal env. */
function renderedPod(): { pod: KubeObject; container: Record<string, unknown>; env: Record<string, string> } {
  const deployment = deploymentOf(renderJobApiManifests(sampleJobApiValues()));
  const template = (
    deployment.spec as { template: { metadata: KubeObject["metadata"]; spec: Record<string, unknown> } }
  ).template;
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { ...template.metadata, name: "p", namespace: "blastplane" },
    spec: template.spec,
  };
  const container = (template.spec.containers as Record<string, unknown>[])[0] as Record<string, unknown>;
  const env = Object.fromEntries((container.env as { name: string; value: string }[]).map((e) => [e.name, e.value]));
  return { pod: pod as KubeObject, container, env };
}

describe("the local stack's stand-ins for what AKS gives a pod", () => {
  const store = path.join(root, "secrets");
  mkdirSync(store, { recursive: true });
  writeFileSync(path.join(store, API_TOKEN_SECRET), '{"current":{"value":"t"}}');
  writeFileSync(path.join(store, "webhook-secret"), "not the pod's");
  const supplement = azureStandIns({
    namespaces: ["blastplane"],
    serviceAccountName: jobApiServiceAccountName(),
    storageConnectionString: AZURITE,
    tokenStoreDir: store,
    secretNames: [API_TOKEN_SECRET],
    identityDiscoveryUrl: DISCOVERY,
    kubeconfig: () => "apiVersion: v1\nkind: Config\n",
    nodeCacheDir: "/var/cache/blastplane-nodes",
  });

  it("B-027 the job API rendered for Azure gets Azurite for its storage account, the token store for Key Vault, the local identity provider and a kubeconfig; nothing else changes", () => {
    const { pod, container, env } = renderedPod();
    // The Azure rendering, unchanged: workload identity, Key Vault, the account name.
    expect(pod.metadata.labels?.["azure.workload.identity/use"]).toBe("true");
    expect(env).toMatchObject({
      JOBAPI_STORAGE_ACCOUNT_NAME: "blastplanedata",
      JOBAPI_KEY_VAULT_URL: "https://blastplane-kv.vault.azure.net/",
      // Its shard and warm-up pods run the image it runs, pinned by the same digest.
      JOBAPI_K8S_IMAGE: (container as { image: string }).image,
    });
    expect(env.JOBAPI_K8S_IMAGE).toMatch(/\/blastplane-jobapi@sha256:[0-9a-f]{64}$/);
    const dir = path.join(root, "pod-1");
    const supplied = supplement({
      pod,
      container,
      env,
      dir: () => {
        mkdirSync(dir, { recursive: true });
        return dir;
      },
      owner: undefined,
    });
    const { JOBAPI_STORAGE_ACCOUNT_NAME, JOBAPI_KEY_VAULT_URL, ...kept } = env;
    expect(supplied?.env).toEqual({
      ...kept,
      JOBAPI_STORAGE_CONNECTION_STRING: AZURITE,
      JOBAPI_SECRETS_DIR: path.join(dir, "secrets"),
      JOBAPI_AUTH_DISCOVERY_URL: DISCOVERY,
      KUBECONFIG: path.join(dir, "kubeconfig"),
      // The nodes' database cache (a hostPath its shard pods mount), as the stack's own job API has it.
      JOBAPI_K8S_DB_CACHE_DIR: "/var/cache/blastplane-nodes",
    });
    // Only the API token is copied, not the store's other secrets.
    expect(readdirSync(path.join(dir, "secrets"))).toEqual([API_TOKEN_SECRET]);
    expect(readFileSync(path.join(dir, "secrets", API_TOKEN_SECRET), "utf8")).toBe('{"current":{"value":"t"}}');
    expect(readFileSync(path.join(dir, "kubeconfig"), "utf8")).toContain("kind: Config");
    supplied?.stop?.();
  });

  it("a pod not rendered for Azure (a shard Job's) is left as it is", () => {
    const { pod, container, env } = renderedPod();
    delete pod.metadata.labels?.["azure.workload.identity/use"];
    expect(supplement({ pod, container, env, dir: () => root, owner: undefined })).toBeUndefined();
  });

  it("the job API's service account is read from its manifest: the one the rendered Deployment runs as", () => {
    const { pod } = renderedPod();
    expect(jobApiServiceAccountName()).toBe("blastplane-jobapi");
    expect((pod.spec as { serviceAccountName?: string }).serviceAccountName).toBe(jobApiServiceAccountName());
  });

  it("a pod labelled for the workload identity outside the job API's namespace gets no Azurite key, token or kubeconfig", () => {
    const { pod, container, env } = renderedPod();
    pod.metadata.namespace = "someone-else";
    const dir = path.join(root, "pod-elsewhere");
    const supplied = supplement({
      pod,
      container,
      env,
      dir: () => {
        mkdirSync(dir, { recursive: true });
        return dir;
      },
      owner: undefined,
    });
    expect(supplied).toBeUndefined();
    expect(() => readdirSync(dir)).toThrow();
  });

  it("a pod labelled for the workload identity in the job API's namespace under another service account gets nothing", () => {
    const { pod, container, env } = renderedPod();
    (pod.spec as Record<string, unknown>).serviceAccountName = "default";
    expect(supplement({ pod, container, env, dir: () => root, owner: undefined })).toBeUndefined();
    delete (pod.spec as Record<string, unknown>).serviceAccountName;
    expect(supplement({ pod, container, env, dir: () => root, owner: undefined })).toBeUndefined();
  });
});
