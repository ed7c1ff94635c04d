import { readFileSync } from "node:fs";
import path from "node:path";
import {
  ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding,
} from "kubernetes-models/admissionregistration.k8s.io/v1";
import { Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { Secret, ServiceAccount } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { renderJobApiManifests } from "../../shared/cluster/job-api-manifests.js";
import { sampleJobApiValues } from "../support/job-api-values.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const load = (file: string) =>
  parseAllDocuments(readFileSync(path.join(ROOT, "infra/k8s", file), "utf8"), { uniqueKeys: true }).map((d) =>
    d.toJS(),
  );
const terminal = load("terminal.yaml");
const jobapi = load("jobapi.yaml");
const byKind = (kind: string) => terminal.find((o) => o.kind === kind);
const deployment = jobapi.find((o) => o.kind === "Deployment");
const pod = deployment.spec.template;
const container = (name: string) => pod.spec.containers.find((c: { name: string }) => c.name === name);

describe("the terminal's cluster permissions (infra/k8s/terminal.yaml)", () => {
  it("every object validates against its schema (kubernetes-models)", () => {
    const MODELS: Record<string, new (o: never) => { validate(): void }> = {
      ServiceAccount,
      Secret,
      Role,
      RoleBinding,
      ValidatingAdmissionPolicy,
      ValidatingAdmissionPolicyBinding,
    };
    for (const object of terminal) {
      const Model = MODELS[object.kind];
      if (!Model) throw new Error(`no schema model for ${object.kind}`);
      expect(() => new Model(object as never).validate(), `${object.kind}/${object.metadata.name}`).not.toThrow();
    }
  });

  it("reads pods, logs and jobs and execs, in the blastplane namespace only: no Secrets, no writes", () => {
    const role = byKind("Role");
    expect(role.metadata.namespace).toBe("blastplane");
    expect(role.rules).toEqual([
      { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["pods/log"], verbs: ["get"] },
      { apiGroups: ["batch"], resources: ["jobs"], verbs: ["get", "list", "watch"] },
      { apiGroups: [""], resources: ["pods/exec"], verbs: ["create", "get"] },
    ]);
    expect(terminal.map((o) => o.kind)).not.toContain("ClusterRole");
    expect(terminal.map((o) => o.kind)).not.toContain("ClusterRoleBinding");
    expect(byKind("RoleBinding").subjects).toEqual([
      { kind: "ServiceAccount", name: "blastplane-terminal", namespace: "blastplane" },
    ]);
  });

  it("denies the terminal's exec into anything but shard pods (bp-…), so never into the job API's pod", () => {
    const policy = byKind("ValidatingAdmissionPolicy");
    expect(policy.spec.matchConstraints.resourceRules[0]).toMatchObject({
      operations: ["CONNECT"],
      resources: expect.arrayContaining(["pods/exec", "pods/attach"]),
    });
    expect(policy.spec.matchConditions[0].expression).toContain("system:serviceaccount:blastplane:blastplane-terminal");
    expect(policy.spec.validations[0].expression).toContain('request.name.startsWith("bp-")');
    expect(byKind("ValidatingAdmissionPolicyBinding").spec).toEqual({
      policyName: policy.metadata.name,
      validationActions: ["Deny"],
    });
  });
});

describe("the terminal daemon's container in the job-API pod (infra/k8s/jobapi.yaml)", () => {
  it("B-174 exposes no port: the daemon is reached on the pod's loopback only", () => {
    expect(container("terminal").ports).toBeUndefined();
    expect(container("jobapi").ports.map((p: { containerPort: number }) => p.containerPort)).toEqual([8080]);
    const service = jobapi.find((o) => o.kind === "Service");
    expect(service.spec.ports.map((p: { port: number }) => p.port)).toEqual([8080]);
  });

  it("runs the daemon with the terminal account's token, never the job API's token, data or Azure identity", () => {
    const daemon = container("terminal");
    expect(daemon.command).toEqual(["node", "--enable-source-maps", "dist/jobapi/terminal-daemon.js"]);
    const mounts = Object.fromEntries(
      daemon.volumeMounts.map((m: { name: string; mountPath: string }) => [m.mountPath, m.name]),
    );
    expect(mounts["/var/run/secrets/kubernetes.io/serviceaccount"]).toBe("terminal-token");
    expect(Object.values(mounts)).not.toContain("data");
    const volume = pod.spec.volumes.find((v: { name: string }) => v.name === "terminal-token");
    expect(volume.secret.secretName).toBe(byKind("Secret").metadata.name);
    expect(byKind("Secret").metadata.annotations["kubernetes.io/service-account.name"]).toBe("blastplane-terminal");
    expect(pod.metadata.annotations["azure.workload.identity/skip-containers"].split(";")).toContain("terminal");
    expect(daemon.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    expect(pod.spec.shareProcessNamespace ?? false).toBe(false);
  });

  it("configures the job API's terminal gateway (token validation and allowed origins)", () => {
    const names = container("jobapi").env.map((e: { name: string }) => e.name);
    expect(names).toEqual(
      expect.arrayContaining(["JOBAPI_AUTH_CLIENT_ID", "JOBAPI_AUTH_TENANT_ID", "JOBAPI_TERMINAL_ALLOWED_ORIGINS"]),
    );
  });
});

describe("the deploy renders the terminal's objects with its container (shared/cluster/job-api-manifests.ts)", () => {
  const values = sampleJobApiValues({ namespace: "team-a", web_app_origin: "https://console.example" });
  const named = (objects: { kind: string; metadata: { name: string; namespace?: string } }[]) =>
    objects.map((o) => `${o.kind}/${o.metadata.name}${o.metadata.namespace ? `@${o.metadata.namespace}` : ""}`);

  it("B-027 puts every object of terminal.yaml, in the workspace's namespace, before the Deployment that mounts its token Secret", () => {
    const objects = renderJobApiManifests(values);
    const at = objects.findIndex((o) => o.kind === "Deployment");
    expect(named(objects.slice(at - terminal.length, at))).toEqual([
      "ServiceAccount/blastplane-terminal@team-a",
      "Secret/blastplane-terminal-token@team-a",
      "Role/blastplane-terminal@team-a",
      "RoleBinding/blastplane-terminal@team-a",
      "ValidatingAdmissionPolicy/blastplane-terminal-exec",
      "ValidatingAdmissionPolicyBinding/blastplane-terminal-exec",
    ]);
    const byName = (kind: string) => objects.find((o) => o.kind === kind && o.metadata.name.includes("terminal"));
    expect(byName("RoleBinding")?.subjects).toEqual([
      { kind: "ServiceAccount", name: "blastplane-terminal", namespace: "team-a" },
    ]);
    const policy = byName("ValidatingAdmissionPolicy")?.spec as {
      matchConditions: { expression: string }[];
      validations: { expression: string }[];
    };
    expect(policy.matchConditions[0]?.expression).toBe(
      'request.userInfo.username == "system:serviceaccount:team-a:blastplane-terminal"',
    );
    expect(policy.validations[0]?.expression).toBe(
      'request.namespace == "team-a" && request.name.startsWith("bp-") && request.subResource != "portforward"',
    );
    // Nothing else of the file changed on the way (the blastplane namespace, as written, renders as it is).
    const asWritten = renderJobApiManifests({ ...values, namespace: "blastplane" });
    expect(asWritten.slice(at - terminal.length, at)).toEqual(terminal);
  });

  it("renders none of them when the terminal's container does not run (no web app origin)", () => {
    const objects = renderJobApiManifests({ ...values, web_app_origin: "" });
    expect(named(objects).filter((n) => n.includes("blastplane-terminal"))).toEqual([]);
  });
});
