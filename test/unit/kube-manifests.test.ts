// The SDK keeps its serializer (generated from the OpenAPI spec) out of the package index.
import { ObjectSerializer } from "@kubernetes/client-node/dist/serializer.js";
import { Job } from "kubernetes-models/batch/v1";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { loadJobApiConfig } from "../../jobapi/config.js";
import { buildShardArgs } from "../../jobapi/executors/executor.js";
import {
  buildShardJob,
  labelValue,
  releaseFolder,
  type ShardJobSettings,
  shardJobName,
} from "../../jobapi/executors/kubernetes-manifests.js";
import { buildWarmupJob } from "../../jobapi/executors/kubernetes-warmup.js";
import { cpuQuantity, memoryQuantity, parseQuantity } from "../../shared/cluster/quantity.js";

const SETTINGS: ShardJobSettings = {
  namespace: "blastplane",
  image: "registry.example/blastplane-jobapi:1.2.3",
  nodeSelector: { "blastplane.io/pool": "blast" },
  tolerations: [{ key: "blastplane.io/pool", operator: "Equal", value: "blast", effect: "NoSchedule" }],
  backoffLimit: 1,
  activeDeadlineSeconds: 3600,
  ttlSecondsAfterFinished: 600,
  workingSetBytes: 256 * 1024 ** 2,
  dbCacheHostPath: "/mnt/blastdb",
};

const spec = {
  jobId: "tz1doyvc4e87",
  shardId: "b0-p2",
  program: "blastn",
  args: buildShardArgs({
    optionArgs: ["-evalue", "0.001"],
    queryPath: "/data/work/tz1doyvc4e87/b0.fa",
    dbPath: "parts/p2/db_p2",
    outputPath: "/data/work/tz1doyvc4e87/out/b0-p2.xml",
    threads: 2,
  }),
  outputPath: "/data/work/tz1doyvc4e87/out/b0-p2.xml",
  cwd: "/data/databases/db/2026-11-22-04-41-01",
  attempt: 2,
  batch: 0,
  queryPath: "/data/work/tz1doyvc4e87/b0.fa",
  database: { name: "nt_prok", version: "2026-11-22-04-41-01" },
  memoryBytes: 3 * 1024 ** 3,
  threads: 2,
};

/** Fields the SDK's model of `type` does not know (the API server drops or, strictly, rejects them). */
function unknownFields(value: unknown, type: string): unknown {
  return ObjectSerializer.serialize(ObjectSerializer.deserialize(value, type), type);
}

describe("shard Job manifests", () => {
  it("validate against the Kubernetes OpenAPI schemas and carry no field the API does not know", () => {
    const job = buildShardJob(spec, SETTINGS);
    expect(() => new Job(job as ConstructorParameters<typeof Job>[0]).validate()).not.toThrow();
    expect(unknownFields(job, "V1Job")).toEqual(job);
    // The check has teeth: a misspelled field or a wrong type fails.
    const typo = structuredClone(job) as unknown as { spec: { template: { spec: Record<string, unknown> } } };
    typo.spec.template.spec.nodeSelecter = { a: "b" };
    expect(unknownFields(typo, "V1Job")).not.toEqual(typo);
    const wrongType = structuredClone(job) as unknown as { spec: Record<string, unknown> };
    wrongType.spec.backoffLimit = "1";
    expect(() => new Job(wrongType as unknown as ConstructorParameters<typeof Job>[0]).validate()).toThrow(
      /backoffLimit/,
    );
  });

  it("harden the pod: non-root, read-only root filesystem, RuntimeDefault seccomp, no token, no privilege escalation", () => {
    const pod = buildShardJob(spec, SETTINGS).spec?.template.spec;
    const container = pod?.containers[0];
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(container?.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ["ALL"] },
    });
    expect(pod?.restartPolicy).toBe("Never");
    expect(pod?.nodeSelector).toEqual({ "blastplane.io/pool": "blast" });
    expect(pod?.tolerations).toEqual(SETTINGS.tolerations);
    expect(container?.terminationMessagePolicy).toBe("FallbackToLogsOnError");
  });

  it("request and limit the pre-flight's memory plus the working set, one CPU per thread, and bound the Job", () => {
    const job = buildShardJob(spec, SETTINGS);
    const resources = job.spec?.template.spec?.containers[0]?.resources;
    expect(parseQuantity(resources?.requests?.memory)).toBe(3 * 1024 ** 3 + 256 * 1024 ** 2);
    expect(resources?.limits?.memory).toBe(resources?.requests?.memory);
    expect(resources?.requests?.cpu).toBe("2");
    expect(job.spec).toMatchObject({
      backoffLimit: 1,
      activeDeadlineSeconds: 3600,
      ttlSecondsAfterFinished: 600,
      completions: 1,
      parallelism: 1,
    });
  });

  it("name the Job per shard and attempt, label it for one-call listing, and pass BLAST's argv with the pod's paths", () => {
    const job = buildShardJob(spec, SETTINGS);
    expect(job.metadata?.name).toBe("bp-tz1doyvc4e87-b0-p2-a2");
    expect(shardJobName("tz1doyvc4e87", "b0-p2", 2)).toBe(job.metadata?.name);
    expect(job.metadata?.labels).toMatchObject({
      "app.kubernetes.io/managed-by": "blastplane-jobapi",
      "blastplane.io/job-id": "tz1doyvc4e87",
      "blastplane.io/shard": "b0-p2",
      "blastplane.io/attempt": "2",
      "blastplane.io/database": "nt_prok",
      "blastplane.io/release": "2026-11-22-04-41-01",
    });
    expect(job.spec?.template.metadata?.labels).toEqual(job.metadata?.labels);
    const container = job.spec?.template.spec?.containers[0];
    expect(container?.command).toEqual(["node", "--enable-source-maps", "dist/jobapi/shard.js"]);
    expect(container?.args).toEqual([
      "blastn",
      "-evalue",
      "0.001",
      "-query",
      "/scratch/query.fa",
      "-db",
      "parts/p2/db_p2",
      "-outfmt",
      "5",
      "-out",
      "/scratch/out.xml",
      "-num_threads",
      "2",
    ]);
    // The storage connection is never in the Job: the pod reads it from a Secret.
    const storage = container?.env?.find((e) => e.name === "SHARD_STORAGE_CONNECTION_STRING");
    expect(storage?.value).toBeUndefined();
    expect(storage?.valueFrom?.secretKeyRef?.name).toBe("blastplane-shard-storage");
    expect(JSON.stringify(job)).not.toMatch(/AccountKey|DefaultEndpointsProtocol/);
  });

  it("B-195 B-219: with identity-based storage, run as the federated service account with the workload identity label and the Blob URL, and no Secret", () => {
    const job = buildShardJob(spec, {
      ...SETTINGS,
      workloadIdentity: {
        serviceAccountName: "blastplane-shard",
        blobUrl: "https://blastplanework.blob.core.windows.net",
      },
    });
    expect(() => new Job(job as ConstructorParameters<typeof Job>[0]).validate()).not.toThrow();
    expect(unknownFields(job, "V1Job")).toEqual(job);
    const pod = job.spec?.template;
    expect(pod?.metadata?.labels?.["azure.workload.identity/use"]).toBe("true");
    // Only the pods carry the webhook's label; the Job's own labels (its selectors) are unchanged.
    expect(job.metadata?.labels?.["azure.workload.identity/use"]).toBeUndefined();
    expect(pod?.spec?.serviceAccountName).toBe("blastplane-shard");
    // The webhook mounts the identity token itself; the API server's token stays out.
    expect(pod?.spec?.automountServiceAccountToken).toBe(false);
    const env = pod?.spec?.containers[0]?.env ?? [];
    expect(env.find((e) => e.name === "SHARD_STORAGE_BLOB_URL")?.value).toBe(
      "https://blastplanework.blob.core.windows.net",
    );
    expect(env.some((e) => e.valueFrom?.secretKeyRef)).toBe(false);
    expect(env.map((e) => e.name)).not.toContain("SHARD_STORAGE_CONNECTION_STRING");
  });

  it("B-195 B-219: a warm-up Job with identity-based storage runs as the federated service account with the Blob and Table URLs, and no Secret", () => {
    const identity = {
      kind: "identity",
      blobUrl: "https://blastplanework.blob.core.windows.net",
      tableUrl: "https://blastplanework.table.core.windows.net",
      queueUrl: undefined,
      clientId: undefined,
    } as const;
    const job = buildWarmupJob(
      { settings: SETTINGS, storage: identity, serviceAccountName: "blastplane-shard" },
      "nt",
      "2026-11-22-04-41-01",
      "aks-blast-0",
    );
    expect(() => new Job(job as ConstructorParameters<typeof Job>[0]).validate()).not.toThrow();
    expect(unknownFields(job, "V1Job")).toEqual(job);
    const pod = job.spec?.template;
    expect(pod?.metadata?.labels?.["azure.workload.identity/use"]).toBe("true");
    expect(pod?.spec?.serviceAccountName).toBe("blastplane-shard");
    expect(pod?.spec?.automountServiceAccountToken).toBe(false);
    expect(pod?.spec?.nodeSelector?.["kubernetes.io/hostname"]).toBe("aks-blast-0");
    const env = pod?.spec?.containers[0]?.env ?? [];
    expect(env.find((e) => e.name === "SHARD_STORAGE_BLOB_URL")?.value).toBe(identity.blobUrl);
    expect(env.find((e) => e.name === "SHARD_STORAGE_TABLE_URL")?.value).toBe(identity.tableUrl);
    expect(env.some((e) => e.valueFrom?.secretKeyRef)).toBe(false);

    // With the embedded Azurite the pod reads the connection string from the Secret, never from the Job.
    const local = buildWarmupJob(
      { settings: SETTINGS, storage: { kind: "connection-string", connectionString: "UseDevelopmentStorage=true" } },
      "nt",
      "2026-11-22-04-41-01",
      "aks-blast-0",
    );
    expect(() => new Job(local as ConstructorParameters<typeof Job>[0]).validate()).not.toThrow();
    expect(local.spec?.template.metadata?.labels?.["azure.workload.identity/use"]).toBeUndefined();
    expect(local.spec?.template.spec?.serviceAccountName).toBeUndefined();
    expect(
      local.spec?.template.spec?.containers[0]?.env?.find((e) => e.name === "SHARD_STORAGE_CONNECTION_STRING")
        ?.valueFrom?.secretKeyRef?.name,
    ).toBe("blastplane-shard-storage");
    expect(JSON.stringify(local)).not.toMatch(/UseDevelopmentStorage|AccountKey/);
  });

  it("keep label values valid and release folders inside the cache", () => {
    expect(labelValue("A".repeat(70))).toHaveLength(63);
    expect(labelValue("-db.name_")).toBe("db.name");
    expect(releaseFolder("/cache", "nt", "2026-11-22-04-41-01")).toBe("/cache/nt/2026-11-22-04-41-01");
    expect(() => releaseFolder("/cache", "..", "2026-11-22-04-41-01")).toThrow();
    expect(() => releaseFolder("/cache", "nt", "../../etc")).toThrow();
  });

  it("read quantities as Kubernetes writes them", () => {
    expect(parseQuantity("512Mi")).toBe(512 * 1024 ** 2);
    expect(parseQuantity("1.5Gi")).toBe(1.5 * 1024 ** 3);
    expect(parseQuantity("500m")).toBe(0.5);
    expect(parseQuantity("2")).toBe(2);
    expect(parseQuantity("1e3")).toBe(1000);
    expect(parseQuantity("1G")).toBe(1e9);
    expect(parseQuantity("lots")).toBeUndefined();
    expect(memoryQuantity(1024 ** 2 + 1)).toBe("2Mi");
    expect(cpuQuantity(0.25)).toBe("250m");
  });
});

describe("JOBAPI_K8S_* configuration", () => {
  const base = { JOBAPI_STORAGE_CONNECTION_STRING: "UseDevelopmentStorage=true" };

  it("selects the Kubernetes executor with the BLAST pool's selector and toleration by default", () => {
    const c = loadJobApiConfig({ ...base, JOBAPI_EXECUTOR: "kubernetes" }, "/srv");
    expect(c.executor).toBe("kubernetes");
    expect(c.kubernetes.nodeSelector).toEqual({ "blastplane.io/pool": "blast" });
    expect(c.kubernetes.tolerations).toEqual([
      { key: "blastplane.io/pool", operator: "Equal", value: "blast", effect: "NoSchedule" },
    ]);
    expect(c.kubernetes.dbCacheDir).toBe("/srv/.data/jobapi/databases");
  });

  it("refuses a node selector that names a key twice, and malformed tolerations, naming the setting", () => {
    expect(() => loadJobApiConfig({ ...base, JOBAPI_K8S_NODE_SELECTOR: "pool=blast,pool=gpu" })).toThrow(
      /JOBAPI_K8S_NODE_SELECTOR: the key pool is given twice/,
    );
    expect(() => loadJobApiConfig({ ...base, JOBAPI_K8S_TOLERATIONS: "pool=blast" })).toThrow(/JOBAPI_K8S_TOLERATIONS/);
    expect(() => loadJobApiConfig({ ...base, JOBAPI_EXECUTOR: "docker" })).toThrow(/JOBAPI_EXECUTOR/);
    expect(
      loadJobApiConfig({ ...base, JOBAPI_K8S_TOLERATIONS: "dedicated:NoSchedule", JOBAPI_K8S_NODE_SELECTOR: "" })
        .kubernetes,
    ).toMatchObject({
      tolerations: [{ key: "dedicated", operator: "Exists", effect: "NoSchedule" }],
      nodeSelector: {},
    });
  });
});

describe("the job API's cluster permissions (infra/k8s/jobapi.yaml)", () => {
  it("grant the executor's calls and nothing on other resources", () => {
    const docs = parseAllDocuments(
      readFileSync(path.resolve(import.meta.dirname, "../../infra/k8s/jobapi.yaml"), "utf8"),
    ).map((d) => d.toJS());
    const rules = docs
      .filter((d) => d.kind === "Role" || d.kind === "ClusterRole")
      .flatMap((d) => d.rules as { apiGroups: string[]; resources: string[]; verbs: string[] }[]);
    const allowed = (group: string, resource: string, verb: string) =>
      rules.some((r) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb));
    for (const verb of ["create", "delete", "deletecollection", "list", "watch"])
      expect(allowed("batch", "jobs", verb)).toBe(true);
    for (const verb of ["list", "watch"]) expect(allowed("", "pods", verb)).toBe(true);
    expect(allowed("", "pods/log", "get")).toBe(true);
    expect(allowed("", "nodes", "list")).toBe(true);
    // In Azure the shard pods use the workload identity: there is no storage Secret to write, so no Secret verb at all.
    for (const verb of ["create", "update", "get", "list"]) expect(allowed("", "secrets", verb)).toBe(false);
    expect(rules.flatMap((r) => r.resources).sort()).toEqual(["jobs", "nodes", "pods", "pods/log"]);
  });
});
