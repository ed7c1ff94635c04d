import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";

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
    expect(dockerfile).toMatch(/USER node/);
    expect(dockerfile).toMatch(/JOBAPI_PORT=8080/);
  });
});
