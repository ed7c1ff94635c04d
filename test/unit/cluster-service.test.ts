import { describe, expect, it } from "vitest";
import { clusterOperationId, createClusterService } from "../../shared/cluster/cluster-service.js";
import type { AuditInput } from "../../shared/ops/audit.js";
import { Orchestrations } from "../../shared/orchestrations/queue-labels.js";
import type { Workspace } from "../../shared/workspace/workspace.js";
import { captureLogger, fakeOrchestrations } from "../support/service-fakes.js";

const CALLER = { oid: "user-1", name: "Ada", roles: ["Contributor"] } as never;
const WORKSPACE: Workspace = {
  subscription_id: "00000000-0000-4000-8000-000000000001",
  resource_group: "rg-blast",
  location: "westeurope",
  storage_account: "blastplanedata",
  registry: "blastplanecr",
  cluster_name: "aks-blast",
  node_size: "Standard_E8s_v5",
  node_count: 1,
};

function service(workspace: Workspace = WORKSPACE, extra: Partial<Parameters<typeof createClusterService>[0]> = {}) {
  const hub = fakeOrchestrations();
  const audits: AuditInput[] = [];
  const svc = createClusterService({
    workspace: async () => ({
      workspace,
      etag: "1",
      updated_at: "2026-01-01T00:00:00Z",
      updated_by: { oid: "user-1", name: "Ada" },
    }),
    orchestrations: hub.client,
    audit: { record: async (entry: AuditInput) => void audits.push(entry) } as never,
    logger: captureLogger(),
    databases: async () => [],
    systemVmSize: "Standard_D2s_v5",
    ...extra,
  });
  return { svc, hub, audits };
}

describe("one cluster operation per cluster", () => {
  it("B-157 B-011 two provision requests that arrive together start one orchestration and both answer it", async () => {
    const { svc, hub, audits } = service();
    const [a, b] = await Promise.all([
      svc.provision(CALLER, { requestId: "r1" }),
      svc.provision(CALLER, { requestId: "r2" }),
    ]);
    expect(hub.starts.filter((s) => s.name === Orchestrations.provisionCluster)).toHaveLength(1);
    expect(a.operation_id).toBe(b.operation_id);
    expect(a.operation_id).toBe(clusterOperationId(WORKSPACE));
    expect(b.state).toBe("queued");
    // Only the request that started it is audited as starting it.
    expect(audits.filter((e) => e.action === "cluster.provision")).toHaveLength(1);
  });

  it("a stop racing a provision of the same cluster answers the provision running", async () => {
    const { svc, hub } = service();
    // Another host started the provision between this request's look and its start.
    hub.hooks.beforeStart = (name, instanceId) => {
      hub.hooks.beforeStart = undefined;
      hub.put({ name, instanceId, runtimeStatus: "Running", input: { action: "provision", target: {} } });
    };
    const answer = await svc.act(CALLER, "stop", { requestId: "r1" });
    expect(hub.starts).toHaveLength(0);
    expect(answer).toMatchObject({ operation_type: "cluster.provision", state: "running" });
  });

  it("the id is the cluster's (case-insensitive, as ARM ids are); another cluster gets another one, a finished one is reused", async () => {
    expect(clusterOperationId({ ...WORKSPACE, cluster_name: "AKS-Blast", resource_group: "RG-BLAST" })).toBe(
      clusterOperationId(WORKSPACE),
    );
    expect(clusterOperationId({ ...WORKSPACE, cluster_name: "aks-other" })).not.toBe(clusterOperationId(WORKSPACE));
    expect(clusterOperationId(WORKSPACE)).toMatch(/^op-[0-9a-f]{32}$/);
    const { svc, hub } = service();
    const first = await svc.provision(CALLER, { requestId: "r1" });
    (hub.instances.get(first.operation_id) as { runtimeStatus: string }).runtimeStatus = "Completed";
    const second = await svc.scale(CALLER, 2, { requestId: "r2" });
    expect(second.operation_id).toBe(first.operation_id);
    expect(hub.starts).toHaveLength(2);
  });
});

describe("the cluster's status for the Cluster page", () => {
  const GIB = 1024 ** 3;
  it("plans the system pool and the BLAST pool from the workspace, checked against the largest prepared database", async () => {
    const { svc } = service(WORKSPACE, {
      databases: async () => [
        { name: "small", bytesToCache: 2 * GIB },
        { name: "nt", bytesToCache: 80 * GIB },
      ],
      summary: async () => null,
    });
    const status = await svc.status();
    expect(status.plan.pools).toEqual([
      { name: "system", vm_size: "Standard_D2s_v5", node_count: 1, memory_gib: 8, vcpus: 2 },
      { name: "blast", vm_size: "Standard_E8s_v5", node_count: 1, memory_gib: 64, vcpus: 8 },
    ]);
    expect(status.plan.largest_database).toEqual({ name: "nt", bytes_to_cache: 80 * GIB });
    expect(status.plan.fits).toBe(false);
    expect(status.plan.detail).toMatch(
      /^database memory requirements of nt \(80\.0 GiB to cache\) exceed the machine type's memory \(Standard_E8s_v5: .* usable of 64 GiB\)\. Remedies: .* such as Standard_D32s_v5/,
    );
    expect(status).toMatchObject({ cluster_name: "aks-blast", cluster: null, operation: null });
    expect(status.cluster_error).toBeUndefined();
  });

  it("reports the cluster Resource Manager has, and says so in a sentence when it cannot be read", async () => {
    const cluster = {
      fqdn: "aks.example",
      power_state: "Stopped",
      provisioning_state: "Succeeded",
      oidc_issuer_url: null,
      kubelet_object_id: null,
      blast_pool: { vm_size: "Standard_E8s_v5", count: 1 },
    };
    expect((await service(WORKSPACE, { summary: async () => cluster }).svc.status()).cluster).toEqual(cluster);
    const failing = service(WORKSPACE, {
      summary: async () => {
        throw Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" });
      },
    });
    const status = await failing.svc.status();
    expect(status.cluster).toBeNull();
    expect(status.cluster_error).toBe("Resource Manager did not answer the cluster's state (ECONNREFUSED); try again");
    expect(status.plan.fits).toBe(true);
  });
});
