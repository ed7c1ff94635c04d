import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { loadJobApiConfig } from "../../jobapi/config.js";

const ROOT = path.resolve(import.meta.dirname, "../..");

describe("job API Kubernetes manifest", () => {
  const text = readFileSync(path.join(ROOT, "infra/k8s/jobapi.yaml"), "utf8");
  const docs = parseAllDocuments(text, { uniqueKeys: true });

  it("parses with no repeated keys (a repeated nodeSelector key silently drops a selector)", () => {
    for (const d of docs) expect(d.errors).toEqual([]);
  });

  it("probes the job API's health and readiness routes on its port, as a non-root container", () => {
    const deployment = docs.map((d) => d.toJS()).find((o) => o.kind === "Deployment");
    const spec = deployment.spec.template.spec;
    const container = spec.containers[0];
    expect(container.readinessProbe.httpGet.path).toBe("/v1/ready");
    expect(container.livenessProbe.httpGet.path).toBe("/v1/health");
    expect(container.ports[0].containerPort).toBe(8080);
    expect(spec.securityContext.runAsNonRoot).toBe(true);
    expect(container.securityContext.allowPrivilegeEscalation).toBe(false);
    const dockerfile = readFileSync(path.join(ROOT, "jobapi/Dockerfile"), "utf8");
    expect(dockerfile).toMatch(/^USER 1000:1000$/m);
    expect(dockerfile).toMatch(/JOBAPI_PORT=8080/);
  });
});

describe("job API Kubernetes manifest: the workload identity, never a storage key (B-195, B-219)", () => {
  const objects = parseAllDocuments(readFileSync(path.join(ROOT, "infra/k8s/jobapi.yaml"), "utf8"), {
    uniqueKeys: true,
  }).map((d) => d.toJS());
  const deployment = objects.find((o) => o.kind === "Deployment");
  const container = deployment.spec.template.spec.containers[0];
  const env = Object.fromEntries((container.env as { name: string; value?: string }[]).map((e) => [e.name, e.value]));

  it("B-195 B-219: the job API runs with the workload identity and names its storage account, with no connection string anywhere", () => {
    expect(deployment.spec.template.metadata.labels["azure.workload.identity/use"]).toBe("true");
    const account = objects.find(
      (o) => o.kind === "ServiceAccount" && o.metadata.name === deployment.spec.template.spec.serviceAccountName,
    );
    expect(account.metadata.annotations["azure.workload.identity/client-id"]).toBeTruthy();
    expect(Object.keys(env).filter((name) => /CONNECTION_STRING|SAS|ACCOUNT_KEY/.test(name))).toEqual([]);
    expect(JSON.stringify(objects)).not.toMatch(/AccountKey=|SharedAccessSignature=|sig=/);
    // The job API's own configuration check accepts exactly this environment, as identity-based storage.
    const filled = Object.fromEntries(
      Object.entries(env).map(([name, value]) => [
        name,
        String(value).replace(
          /\$\{[A-Z_]+\}/g,
          name === "JOBAPI_STORAGE_ACCOUNT_NAME"
            ? "blastplanework"
            : name === "JOBAPI_DISPATCH_FLEET"
              ? "cluster-blastplane"
              : "https://kv.vault.azure.net",
        ),
      ]),
    );
    expect(loadJobApiConfig(filled, "/").storage).toMatchObject({
      kind: "identity",
      blobUrl: "https://blastplanework.blob.core.windows.net",
    });
  });

  it("B-195: shard pods get their own federated service account, which holds no Kubernetes role; the job API may not touch Secrets", () => {
    const shardAccount = objects.find(
      (o) => o.kind === "ServiceAccount" && o.metadata.name === env.JOBAPI_K8S_SERVICE_ACCOUNT,
    );
    expect(shardAccount.metadata.annotations["azure.workload.identity/client-id"]).toBeTruthy();
    expect(shardAccount.automountServiceAccountToken).toBe(false);
    const bound = objects
      .filter((o) => /RoleBinding$/.test(o.kind))
      .flatMap((o) => o.subjects.map((s: { name: string }) => s.name));
    expect(bound).not.toContain(shardAccount.metadata.name);
    const rules = objects.filter((o) => /Role$/.test(o.kind)).flatMap((o) => o.rules);
    expect(rules.flatMap((r: { resources: string[] }) => r.resources)).not.toContain("secrets");
  });
});
