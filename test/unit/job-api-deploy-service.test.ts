import { describe, expect, it } from "vitest";
import { ApplyConflictError } from "../../shared/cluster/job-api-deploy.js";
import { createJobApiDeployService, type JobApiDeploySettings } from "../../shared/cluster/job-api-deploy-service.js";
import { type JobApiValues, renderJobApiManifests } from "../../shared/cluster/job-api-manifests.js";
import { ConflictError, DependencyUnavailableError } from "../../shared/errors.js";
import type { AuditEntry, AuditInput } from "../../shared/ops/audit.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import type { Workspace } from "../../shared/workspace/workspace.js";
import { captureLogger, fakeOrchestrations } from "../support/service-fakes.js";

const DIGEST = `sha256:${"a".repeat(64)}`;
const CALLER = { oid: "user-1", name: "Ada", roles: ["Contributor"] } as never;
const WORKSPACE: Workspace = {
  subscription_id: "00000000-0000-4000-8000-000000000001",
  resource_group: "rg",
  location: "westeurope",
  storage_account: "blastplanedata",
  registry: "BlastplaneCR",
  cluster_name: "aks",
  node_size: "Standard_E8s_v5",
  node_count: 1,
};
const SETTINGS: JobApiDeploySettings = {
  namespace: "blastplane",
  registryLoginServer: undefined,
  workloadIdentityClientId: "22222222-2222-4222-8222-222222222222",
  keyVaultUrl: "https://kv.vault.azure.net/",
  appSubnetCidr: "10.1.0.0/24",
  authClientId: "00000000-0000-4000-8000-000000000001",
  authTenantId: "00000000-0000-4000-8000-000000000000",
  webAppOrigin: "https://portal.example",
  rolloutTimeoutSeconds: 600,
  pollSeconds: 5,
};

function service(
  options: {
    settings?: Partial<JobApiDeploySettings>;
    workspace?: Workspace | null;
    dryRun?: () => Promise<void>;
  } = {},
) {
  const orchestrations = fakeOrchestrations();
  const audits: AuditInput[] = [];
  const dryRuns: { values: JobApiValues; force: boolean }[] = [];
  const svc = createJobApiDeployService({
    orchestrations: orchestrations.client,
    workspace: {
      get: async () =>
        options.workspace === null
          ? undefined
          : {
              workspace: options.workspace ?? WORKSPACE,
              etag: "1",
              updated_at: "",
              updated_by: { oid: "x", name: "x" },
            },
    },
    audit: {
      record: async (entry) => {
        audits.push(entry);
        return entry as unknown as AuditEntry;
      },
    },
    logger: captureLogger(),
    settings: { ...SETTINGS, ...options.settings },
    dryRun: async (values, force) => {
      dryRuns.push({ values, force });
      await options.dryRun?.();
    },
    readRollout: async () => {
      throw new Error("not read here");
    },
  });
  return { svc, orchestrations, audits, dryRuns };
}

describe("the job API deploy service", () => {
  it("renders the workspace's registry and storage account with the digest, checks the apply, then starts the operation (audited)", async () => {
    const { svc, orchestrations, audits, dryRuns } = service();
    const op = await svc.deploy(CALLER, { image_digest: DIGEST, force: false }, { requestId: "req-1" });
    expect(op).toMatchObject({ operation_type: "jobapi.deploy", state: "queued" });
    expect(dryRuns).toEqual([
      {
        force: false,
        values: expect.objectContaining({
          registry: "blastplanecr.azurecr.io",
          storage_account_name: "blastplanedata",
          image_digest: DIGEST,
        }),
      },
    ]);
    expect(orchestrations.starts).toEqual([
      {
        name: Orchestrations.deployJobApi,
        options: {
          instanceId: op.operation_id,
          input: expect.objectContaining({ force: false, rollout_timeout_seconds: 600, poll_seconds: 5 }),
        },
      },
    ]);
    expect(audits).toEqual([
      expect.objectContaining({ action: "jobapi.deploy", outcome: "succeeded", request_id: "req-1" }),
    ]);
    // The rendered Deployment pulls exactly that digest.
    const values = dryRuns[0]?.values as JobApiValues;
    expect(JSON.stringify(renderJobApiManifests(values))).toContain(
      `blastplanecr.azurecr.io/blastplane-jobapi@${DIGEST}`,
    );
  });

  it("fills the terminal's settings from the app's, and runs the terminal daemon only when a web app origin may open it", async () => {
    const { svc, dryRuns } = service();
    await svc.deploy(CALLER, { image_digest: DIGEST, force: false }, { requestId: "r" });
    const values = dryRuns[0]?.values as JobApiValues;
    const pod = (v: JobApiValues) => {
      const deployment = renderJobApiManifests(v).find((o) => o.kind === "Deployment") as unknown as {
        spec: {
          template: {
            spec: {
              containers: { name: string; env?: { name: string; value?: string }[] }[];
              volumes: { name: string }[];
            };
          };
        };
      };
      return deployment.spec.template.spec;
    };
    const withTerminal = pod(values);
    expect(withTerminal.containers.map((c) => c.name)).toEqual(["jobapi", "terminal"]);
    const env = Object.fromEntries((withTerminal.containers[0]?.env ?? []).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      JOBAPI_AUTH_CLIENT_ID: SETTINGS.authClientId,
      JOBAPI_AUTH_TENANT_ID: SETTINGS.authTenantId,
      JOBAPI_TERMINAL_ALLOWED_ORIGINS: "https://portal.example",
    });
    const without = pod({ ...values, web_app_origin: "" });
    expect(without.containers.map((c) => c.name)).toEqual(["jobapi"]);
    expect(without.volumes.map((v) => v.name)).toEqual(["data"]);
  });

  it("answers the deploy already running instead of starting another", async () => {
    const { svc, orchestrations } = service();
    orchestrations.put({
      name: Orchestrations.deployJobApi,
      instanceId: `op-${"1".repeat(32)}`,
      runtimeStatus: "Running",
    });
    const op = await svc.deploy(CALLER, { image_digest: DIGEST, force: false }, { requestId: "r" });
    expect(op.operation_id).toBe(`op-${"1".repeat(32)}`);
    expect(orchestrations.starts).toEqual([]);
  });

  it("refuses before a workspace is saved (409) and without its settings (503 naming them)", async () => {
    await expect(
      service({ workspace: null }).svc.deploy(CALLER, { image_digest: DIGEST, force: false }, { requestId: "r" }),
    ).rejects.toBeInstanceOf(ConflictError);
    const missing = service({ settings: { workloadIdentityClientId: undefined, appSubnetCidr: undefined } });
    const error = await missing.svc
      .deploy(CALLER, { image_digest: DIGEST, force: false }, { requestId: "r" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DependencyUnavailableError);
    expect((error as Error).message).toBe(
      "the job API cannot be deployed without JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID, JOBAPI_APP_SUBNET_CIDR",
    );
    expect(missing.orchestrations.starts).toEqual([]);
  });

  it("a conflicting apply is refused up front, audited as failed with the fields, and starts nothing", async () => {
    const conflict = new ApplyConflictError([
      { object: "Deployment/blastplane-jobapi", manager: "kubectl-edit", field: ".spec.replicas" },
    ]);
    const { svc, orchestrations, audits } = service({
      dryRun: async () => {
        throw conflict;
      },
    });
    await expect(svc.deploy(CALLER, { image_digest: DIGEST, force: false }, { requestId: "r" })).rejects.toBe(conflict);
    expect(orchestrations.starts).toEqual([]);
    expect(audits).toEqual([
      expect.objectContaining({
        outcome: "failed",
        details: expect.objectContaining({ conflicts: conflict.conflicts }),
      }),
    ]);
  });
});

describe("the job API manifests", () => {
  const values: JobApiValues = {
    namespace: "team-a",
    registry: "x.azurecr.io",
    image_digest: DIGEST,
    workload_identity_client_id: SETTINGS.workloadIdentityClientId as string,
    key_vault_url: "https://kv.vault.azure.net/",
    storage_account_name: "data",
    app_subnet_cidr: "10.1.0.0/24",
    auth_client_id: "00000000-0000-4000-8000-000000000001",
    auth_tenant_id: "00000000-0000-4000-8000-000000000000",
    web_app_origin: "https://portal.example",
  };

  it("move every namespaced object and binding subject into the workspace's namespace", () => {
    const objects = renderJobApiManifests(values);
    expect(objects[0]).toMatchObject({ kind: "Namespace", metadata: { name: "team-a" } });
    // Cluster-scoped: the ClusterRole and its binding, the terminal's admission policy and its binding.
    const clusterScoped = (kind: string) => kind.startsWith("Cluster") || kind.startsWith("ValidatingAdmissionPolicy");
    for (const o of objects.slice(1)) if (!clusterScoped(o.kind)) expect(o.metadata.namespace).toBe("team-a");
    const binding = objects.find((o) => o.kind === "ClusterRoleBinding") as unknown as {
      subjects: { namespace: string }[];
    };
    expect(binding.subjects[0]?.namespace).toBe("team-a");
    expect(JSON.stringify(objects)).not.toContain("${");
  });

  it("refuse a placeholder they do not know rather than leave it on the cluster", () => {
    expect(() => renderJobApiManifests(values, "kind: ConfigMap\nvalue: \u0024{NOT_A_VALUE}\n")).toThrow(
      /unknown placeholder \$\{NOT_A_VALUE\}/,
    );
  });
});
