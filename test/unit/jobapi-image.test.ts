import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { DockerfileParser } from "dockerfile-ast";
import {
  ValidatingAdmissionPolicy,
  ValidatingAdmissionPolicyBinding,
} from "kubernetes-models/admissionregistration.k8s.io/v1";
import { DaemonSet, Deployment } from "kubernetes-models/apps/v1";
import { Ingress, NetworkPolicy } from "kubernetes-models/networking.k8s.io/v1";
import { PodDisruptionBudget } from "kubernetes-models/policy/v1";
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from "kubernetes-models/rbac.authorization.k8s.io/v1";
import { Namespace, Service, ServiceAccount } from "kubernetes-models/v1";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { SHARD_COMMAND } from "../../jobapi/executors/kubernetes-manifests.js";

// Rules of our own over dockerfile-ast (hadolint is not in the registries reachable here): what
// makes the job API's image reproducible and safe to run on the cluster.
const ROOT = path.resolve(import.meta.dirname, "../..");
const DOCKERFILE = readFileSync(path.join(ROOT, "jobapi/Dockerfile"), "utf8");
const dockerfile = DockerfileParser.parse(DOCKERFILE);

/** `FROM` images with build arguments replaced by their defaults (a stage name stays as it is). */
function baseImages(): string[] {
  const args = new Map<string, string>();
  for (const arg of dockerfile.getInitialARGs()) {
    const property = arg.getProperty();
    if (property) args.set(property.getName(), property.getValue() ?? "");
  }
  return dockerfile
    .getFROMs()
    .map((from) => (from.getImage() ?? "").replace(/\$\{(\w+)\}|\$(\w+)/g, (_, a, b) => args.get(a ?? b) ?? ""));
}

/** The lint findings of `text` (one line each, empty when it passes). */
function lintDockerfile(text: string): string[] {
  const file = DockerfileParser.parse(text);
  const findings: string[] = [];
  const stages = new Set(
    file
      .getFROMs()
      .map((f) => f.getBuildStage())
      .filter(Boolean),
  );
  const args = new Map(
    file
      .getInitialARGs()
      .flatMap((a) => (a.getProperty() ? [[a.getProperty()!.getName(), a.getProperty()!.getValue() ?? ""]] : [])),
  );
  for (const from of file.getFROMs()) {
    const image = (from.getImage() ?? "").replace(/\$\{(\w+)\}/g, (_, name) => args.get(name) ?? "");
    if (!stages.has(image) && !/@sha256:[0-9a-f]{64}$/.test(image))
      findings.push(`line ${from.getRange().start.line + 1}: base image ${image || "?"} is not pinned by digest`);
  }
  const users = file.getInstructions().filter((i) => i.getKeyword() === "USER");
  const lastFrom = file.getFROMs().at(-1);
  const finalUser = users.filter((u) => !lastFrom || u.getRange().start.line > lastFrom.getRange().start.line).at(-1);
  const user = finalUser?.getArgumentsContent()?.split(":")[0];
  if (!user || user === "root" || user === "0") findings.push("the final stage does not switch to a non-root USER");
  else if (!/^[1-9]\d*$/.test(user))
    findings.push(`USER ${user}: use a numeric uid so runAsNonRoot can verify it without a passwd lookup`);
  for (const add of file.getInstructions().filter((i) => i.getKeyword() === "ADD")) {
    if (/https?:\/\//.test(add.getArgumentsContent() ?? ""))
      findings.push(`line ${add.getRange().start.line + 1}: ADD of a URL (download with a checksum instead)`);
  }
  for (const env of file.getInstructions().filter((i) => i.getKeyword() === "ENV" || i.getKeyword() === "ARG")) {
    if (/\b\w*(SECRET|PASSWORD|TOKEN|ACCOUNT_?KEY|CONNECTION_?STRING)\w*\s*=/i.test(env.getArgumentsContent() ?? ""))
      findings.push(`line ${env.getRange().start.line + 1}: a secret in ${env.getKeyword()} (it stays in the image)`);
  }
  return findings;
}

describe("jobapi/Dockerfile lint", () => {
  it("passes: bases pinned by digest, non-root numeric USER, no ADD of URLs, no secrets in ENV/ARG", () => {
    expect(lintDockerfile(DOCKERFILE)).toEqual([]);
    expect(baseImages().every((image) => /^node:22-bookworm-slim@sha256:[0-9a-f]{64}$/.test(image))).toBe(true);
  });

  it("catches each rule it claims to (a moving tag, root, a URL, a secret)", () => {
    expect(lintDockerfile("FROM node:22\nUSER node\n")).toEqual([
      "line 1: base image node:22 is not pinned by digest",
      "USER node: use a numeric uid so runAsNonRoot can verify it without a passwd lookup",
    ]);
    expect(lintDockerfile(`FROM a@sha256:${"0".repeat(64)}\nUSER 0\n`)).toEqual([
      "the final stage does not switch to a non-root USER",
    ]);
    expect(
      lintDockerfile(`FROM a@sha256:${"0".repeat(64)}\nADD https://x.example/f /f\nENV API_TOKEN=abc\nUSER 1000\n`),
    ).toEqual([
      "line 2: ADD of a URL (download with a checksum instead)",
      "line 3: a secret in ENV (it stays in the image)",
    ]);
  });

  it("a .dockerignore keeps local data, settings and build output out of the build context", () => {
    const ignored = readFileSync(path.join(ROOT, ".dockerignore"), "utf8").split("\n");
    for (const entry of ["node_modules", "dist", ".data", "local.settings.json", ".git"])
      expect(ignored).toContain(entry);
  });

  it("the image's three entrypoints exist in the build output, and the manifests and executors run those paths", () => {
    // The global setup built dist/ as the image's build stage does (node scripts/build.mjs).
    const cmd = dockerfile
      .getInstructions()
      .filter((i) => i.getKeyword() === "CMD")
      .at(-1)
      ?.getArgumentsContent();
    const server = JSON.parse(cmd ?? "[]").at(-1);
    const shard = SHARD_COMMAND.at(-1) as string;
    const warm = readFileSync(path.join(ROOT, "jobapi/executors/kubernetes-warmup.ts"), "utf8").match(
      /"(dist\/jobapi\/warm\.js)"/,
    )?.[1];
    expect([server, shard, warm]).toEqual(["dist/jobapi/server.js", "dist/jobapi/shard.js", "dist/jobapi/warm.js"]);
    for (const file of [server, shard, warm]) expect(existsSync(path.join(ROOT, file)), file).toBe(true);
    // The runtime stage copies dist/jobapi to the working folder the commands are relative to.
    expect(DOCKERFILE).toMatch(/WORKDIR \/app\n/);
    expect(DOCKERFILE).toMatch(/COPY --from=build \/src\/dist\/jobapi \.\/dist\/jobapi/);
  });
});

describe("infra/k8s/jobapi.yaml against the Kubernetes schemas", () => {
  const objects = parseAllDocuments(readFileSync(path.join(ROOT, "infra/k8s/jobapi.yaml"), "utf8"), {
    uniqueKeys: true,
  }).map((d) => d.toJS());
  const MODELS: Record<string, new (o: never) => { validate(): void }> = {
    Namespace,
    ServiceAccount,
    Service,
    Role,
    RoleBinding,
    ClusterRole,
    ClusterRoleBinding,
    Deployment,
    DaemonSet,
    PodDisruptionBudget,
    NetworkPolicy,
    Ingress,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
  };

  it("every object validates against its schema (kubernetes-models)", () => {
    for (const object of objects) {
      const Model = MODELS[object.kind];
      if (!Model) throw new Error(`no schema model for ${object.kind}`);
      expect(() => new Model(object as never).validate(), `${object.kind}/${object.metadata.name}`).not.toThrow();
    }
  });

  it("holds a Namespace, requests and a memory limit on the job API, a disruption budget and an ingress policy", () => {
    const kinds = objects.map((o) => o.kind);
    for (const kind of ["Namespace", "PodDisruptionBudget", "NetworkPolicy"]) expect(kinds).toContain(kind);
    const deployment = objects.find((o) => o.kind === "Deployment");
    const resources = deployment.spec.template.spec.containers[0].resources;
    expect(resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(resources.limits.memory).toBeTruthy();
    // The image is pinned by digest, never by a moving tag.
    expect(deployment.spec.template.spec.containers[0].image).toMatch(/@\$\{IMAGE_DIGEST\}$/);
    const policy = objects.find((o) => o.kind === "NetworkPolicy");
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(["Ingress"]);
    const budget = objects.find((o) => o.kind === "PodDisruptionBudget");
    expect(budget.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
  });
});
