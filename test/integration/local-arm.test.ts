import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import { ContainerServiceClient } from "@azure/arm-containerservice";
import { ResourceManagementClient } from "@azure/arm-resources";
import { SubscriptionClient } from "@azure/arm-resources-subscriptions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedRegistry } from "../../local/arm/providers/container-registry.js";
import { packBuildContext } from "../../shared/cluster/build-context.js";
import { createImageBuildActivities } from "../../shared/cluster/image-build.js";
import { createRegistryBuilds, type RegistryRef } from "../../shared/cluster/registry-builds.js";
import { ARM_WORLD, type LocalArmWorld, startLocalArmWorld } from "../support/local-arm.js";

let world: LocalArmWorld;
beforeAll(async () => {
  world = await startLocalArmWorld({ pageSize: 2 });
});
afterAll(async () => {
  await world?.close();
});

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

describe("local Resource Manager through the real SDK clients", () => {
  it("lists subscriptions with the managed identity's token", async () => {
    const client = new SubscriptionClient(world.credential, world.clientOptions);
    const subscriptions = await collect(client.subscriptions.list());
    expect(subscriptions.map((s) => [s.subscriptionId, s.displayName])).toEqual([
      [ARM_WORLD.subscriptionId, ARM_WORLD.subscriptionName],
    ]);
  });

  it("pages resource groups with nextLink", async () => {
    const client = new ResourceManagementClient(world.credential, ARM_WORLD.subscriptionId, world.clientOptions);
    for (const name of ["rg-a", "rg-b", "rg-c"])
      await client.resourceGroups.createOrUpdate(name, { location: ARM_WORLD.location });
    const groups = await collect(client.resourceGroups.list());
    expect(groups.map((g) => g.name)).toEqual([ARM_WORLD.resourceGroup, "rg-a", "rg-b", "rg-c"]);
    expect(world.arm.requests.filter((r) => r.method === "GET" && r.path.endsWith("/resourcegroups")).length).toBe(2);
  });

  it("refuses a token minted for another audience (the API's), as ARM does", async () => {
    const token = await world.idp.mint({ role: "Reader" });
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = https.get(
        `${world.arm.url}/subscriptions?api-version=2022-12-01`,
        { ca: world.ca, headers: { authorization: `Bearer ${token}` } },
        (res) => {
          let body = "";
          res.on("data", (c: Buffer) => {
            body += c.toString();
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
    });
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body)).toEqual({
      error: { code: "InvalidAuthenticationToken", message: "The access token is invalid." },
    });
  });

  it("answers AuthorizationFailed word for word when the identity lacks the action", async () => {
    const undo = world.arm.deny({ action: "Microsoft.Resources/subscriptions/resourceGroups/read" });
    try {
      const client = new ResourceManagementClient(world.credential, ARM_WORLD.subscriptionId, world.clientOptions);
      const refusedList = (await collect(client.resourceGroups.list()).catch((e: unknown) => e)) as {
        statusCode?: number;
      };
      expect(refusedList.statusCode).toBe(403);
      const error = (await client.resourceGroups.get(ARM_WORLD.resourceGroup).catch((e: unknown) => e)) as {
        statusCode?: number;
        code?: string;
        message?: string;
      };
      expect(error.statusCode).toBe(403);
      expect(error.code).toBe("AuthorizationFailed");
      expect(error.message).toBe(
        `The client '${world.idp.managedIdentity.objectId}' with object id '${world.idp.managedIdentity.objectId}' does not have authorization to perform action 'Microsoft.Resources/subscriptions/resourceGroups/read' over scope '/subscriptions/${ARM_WORLD.subscriptionId}/resourcegroups/${ARM_WORLD.resourceGroup}' or the scope is invalid. If access was recently granted, please refresh your credentials.`,
      );
    } finally {
      undo();
    }
  });

  it("injects a 429 with Retry-After that the SDK's throttling policy honours", async () => {
    world.arm.inject({ method: "GET", path: /\/resourcegroups\/rg-a$/i, status: 429, retryAfterSeconds: 0, times: 2 });
    const client = new ResourceManagementClient(world.credential, ARM_WORLD.subscriptionId, {
      ...world.clientOptions,
      retryOptions: { maxRetries: 3 },
    });
    const group = await client.resourceGroups.get("rg-a");
    expect(group.name).toBe("rg-a");
    const statuses = world.arm.requests
      .filter((r) => r.path.endsWith("/rg-a") && r.method === "GET")
      .map((r) => r.status);
    expect(statuses).toEqual([429, 429, 200]);
  });
});

describe("long-running operations on the local Resource Manager (ARM's semantics, through @azure/arm-containerservice)", () => {
  const clusterBody = (count: number) => ({
    location: ARM_WORLD.location,
    dnsPrefix: "blast",
    agentPoolProfiles: [{ name: "system", count, vmSize: "Standard_D2s_v5", mode: "System" as const }],
  });
  const client = () => new ContainerServiceClient(world.credential, ARM_WORLD.subscriptionId, world.clientOptions);

  it("PUT answers 201 with Azure-AsyncOperation, Location and Retry-After, InProgress until polled, then Succeeded", async () => {
    const headers: Record<string, string | undefined> = {};
    const poller = await client().managedClusters.beginCreateOrUpdate(
      ARM_WORLD.resourceGroup,
      "aks-lro",
      clusterBody(1),
      {
        updateIntervalInMs: 0,
        onResponse: (raw) => {
          if (raw.request.method === "PUT") {
            headers.status = String(raw.status);
            headers.asyncOperation = raw.headers.get("azure-asyncoperation");
            headers.location = raw.headers.get("location");
            headers.retryAfter = raw.headers.get("retry-after");
            headers.etag = raw.headers.get("etag");
          }
        },
      },
    );
    expect(headers.status).toBe("201");
    expect(headers.asyncOperation).toMatch(/\/providers\/Microsoft\.ContainerService\/locations\/eastus\/operations\//);
    expect(headers.location).toMatch(/\/operationresults\//);
    expect(headers.retryAfter).toBe("0");
    expect(headers.etag).toMatch(/^".+"$/);
    const cluster = await poller.pollUntilDone();
    expect(cluster.provisioningState).toBe("Succeeded");
    expect(cluster.agentPoolProfiles?.map((p) => [p.name, p.count])).toEqual([["system", 1]]);
  });

  it("refuses a second operation on the same resource with 409 Conflict while one runs", async () => {
    world.arm.settings.pollsBeforeDone = 5;
    try {
      await client().managedClusters.beginCreateOrUpdate(ARM_WORLD.resourceGroup, "aks-lro", clusterBody(2));
      const error = (await client()
        .agentPools.beginCreateOrUpdate(ARM_WORLD.resourceGroup, "aks-lro", "system", {
          count: 3,
          vmSize: "Standard_D2s_v5",
          mode: "System",
        })
        .catch((e: unknown) => e)) as { statusCode?: number; code?: string };
      expect(error.statusCode).toBe(409);
      expect(error.code).toBe("Conflict");
    } finally {
      world.arm.settings.pollsBeforeDone = 1;
      world.arm.operations.settleAll();
    }
  });

  it("ends an operation Failed with the planned error, and the resource's provisioningState says Failed", async () => {
    world.arm.planOperation({
      resource: /managedClusters\/aks-fail$/i,
      status: "Failed",
      error: {
        code: "QuotaExceeded",
        message: "Operation could not be completed as it results in exceeding approved quota.",
      },
    });
    const error = (await client()
      .managedClusters.beginCreateOrUpdateAndWait(ARM_WORLD.resourceGroup, "aks-fail", clusterBody(1), {
        updateIntervalInMs: 0,
      })
      .catch((e: unknown) => e)) as { code?: string; message?: string };
    // core-lro reports a Failed operation as "The long-running operation has failed. <code>. <message>".
    expect(error.message).toContain("QuotaExceeded. Operation could not be completed");
    expect((await client().managedClusters.get(ARM_WORLD.resourceGroup, "aks-fail")).provisioningState).toBe("Failed");
  });

  it("fails the second poll when told to (fault injection on the operation URL)", async () => {
    world.arm.settings.pollsBeforeDone = 3;
    world.arm.inject({ method: "GET", path: /\/operations\//, skip: 1, status: 500 });
    try {
      const error = (await client()
        .managedClusters.beginCreateOrUpdateAndWait(ARM_WORLD.resourceGroup, "aks-poll", clusterBody(1), {
          updateIntervalInMs: 0,
        })
        .catch((e: unknown) => e)) as { statusCode?: number };
      expect(error.statusCode).toBe(500);
    } finally {
      world.arm.settings.pollsBeforeDone = 1;
      world.arm.operations.settleAll();
      world.arm.reset();
    }
  });

  it("honours If-Match: a stale ETag is refused with 412 PreconditionFailed", async () => {
    const error = (await client()
      .managedClusters.beginCreateOrUpdate(ARM_WORLD.resourceGroup, "aks-lro", clusterBody(1), { ifMatch: '"stale"' })
      .catch((e: unknown) => e)) as { statusCode?: number; code?: string };
    expect(error.statusCode).toBe(412);
    expect(error.code).toBe("PreconditionFailed");
  });

  it("refuses a cluster name ARM would reject, with ARM's InvalidParameter", async () => {
    const error = (await client()
      .managedClusters.beginCreateOrUpdate(ARM_WORLD.resourceGroup, "-bad-", clusterBody(1))
      .catch((e: unknown) => e)) as { statusCode?: number; code?: string };
    expect(error.statusCode).toBe(400);
    expect(error.code).toBe("InvalidParameter");
  });
});

describe("registry runs on the local Resource Manager (the image build's REST calls through @azure/core-client)", () => {
  const registry: RegistryRef = {
    subscription_id: ARM_WORLD.subscriptionId,
    resource_group: ARM_WORLD.resourceGroup,
    name: "blastcr",
  };
  const dirs: string[] = [];
  /** A build context folder: a Dockerfile at `jobapi/Dockerfile` (or not), a source file, and what .dockerignore drops. */
  const contextDir = (withDockerfile: boolean) => {
    const dir = mkdtempSync(path.join(tmpdir(), "bp-context-"));
    dirs.push(dir);
    mkdirSync(path.join(dir, "jobapi"));
    mkdirSync(path.join(dir, "node_modules", "x"), { recursive: true });
    if (withDockerfile) writeFileSync(path.join(dir, "jobapi", "Dockerfile"), "FROM node:22\n");
    writeFileSync(path.join(dir, "jobapi", "server.ts"), "export {};\n");
    writeFileSync(path.join(dir, "node_modules", "x", "index.js"), "ignored\n");
    writeFileSync(path.join(dir, "debug.log"), "ignored\n");
    writeFileSync(path.join(dir, ".dockerignore"), "node_modules\n*.log\n");
    return dir;
  };
  const builds = () => createRegistryBuilds({ credential: world.credential, clientOptions: world.clientOptions });
  const activities = (dir: string) => createImageBuildActivities({ registry: builds, contextDir: () => dir });
  const input = {
    registry,
    login_server: "blastcr.azurecr.io",
    repository: "blastplane-jobapi",
    dockerfile: "jobapi/Dockerfile",
    timeout_seconds: 3600,
    poll_seconds: 1,
  };
  /** What the orchestrator does between its timers: read the run until it ends. */
  const runToEnd = async (dir: string, runId: string) => {
    for (let i = 0; i < 10; i++) {
      const poll = await activities(dir).read({ registry, run_id: runId });
      if (poll.terminal) return poll;
    }
    throw new Error("the run did not end");
  };

  beforeAll(() => {
    seedRegistry(
      world.arm,
      {
        subscriptionId: ARM_WORLD.subscriptionId,
        resourceGroup: ARM_WORLD.resourceGroup,
        location: ARM_WORLD.location,
      },
      "blastcr",
    );
  });
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("B-004 uploads the context through the registry's upload URL, schedules the run under its build's name (a taskRun: polled as ACR answers it; the same name again is the same run), runs the build (Queued, Running, Succeeded) and reports the image by digest", async () => {
    const dir = contextDir(true);
    const uploaded = await activities(dir).upload(input);
    // The context is the folder less what .dockerignore drops, packed the same way each time.
    expect(uploaded).toMatchObject({ files: 3, context_digest: (await packBuildContext(dir)).digest });
    expect(uploaded.source_location).toMatch(/^source\/\d{8}\/[0-9a-f-]+\.tar\.gz$/);
    const scheduleInput = { ...input, source_location: uploaded.source_location, run_name: "bp-first-build" };
    const { run_id } = await activities(dir).schedule(scheduleInput);
    // A named run (ACR's taskRuns): its PUT a long-running operation (201 + Azure-AsyncOperation, polled).
    const scheduled = world.arm.requests.filter(
      (r) => r.method === "PUT" && /\/taskRuns\/bp-first-build$/.test(r.path),
    );
    expect(scheduled.map((r) => r.status)).toEqual([201]);
    // B-004 Scheduled again under the same name (the host died before the run id was recorded): the
    // same run, and no second one.
    const runsBefore = world.arm.store.list("Microsoft.ContainerRegistry/registries/runs").length;
    expect(await activities(dir).schedule(scheduleInput)).toEqual({ run_id });
    expect(world.arm.store.list("Microsoft.ContainerRegistry/registries/runs")).toHaveLength(runsBefore);
    expect(world.arm.requests.filter((r) => r.method === "PUT" && /\/taskRuns\//.test(r.path))).toHaveLength(1);
    const first = await activities(dir).read({ registry, run_id });
    expect(first).toMatchObject({ status: "Running", terminal: false });
    const done = await runToEnd(dir, run_id);
    expect(done).toMatchObject({
      status: "Succeeded",
      output_image: { repository: "blastplane-jobapi", tag: run_id, digest: uploaded.context_digest },
    });
    expect(done.log_tail).toContain(`Run ID: ${run_id} was successful`);
    // The upload and the log went through SAS URLs with no token; ARM saw only its own calls.
    expect(world.arm.requests.filter((r) => r.path === "/_blobs/…").map((r) => r.status)).toContain(201);
  });

  it("a run whose context lacks the Dockerfile fails, and its log says why", async () => {
    const dir = contextDir(false);
    const uploaded = await activities(dir).upload(input);
    const { run_id } = await activities(dir).schedule({
      ...input,
      source_location: uploaded.source_location,
      run_name: "bp-no-dockerfile",
    });
    const done = await runToEnd(dir, run_id);
    expect(done).toMatchObject({ status: "Failed", terminal: true, error: "failed during run, err: exit status 1" });
    expect(done.output_image).toBeUndefined();
    expect(done.log_tail).toContain("failed to read dockerfile: open jobapi/Dockerfile: no such file or directory");
  });

  it("a scheduleRun whose operation fails is refused with the registry's error (no run id made up)", async () => {
    world.arm.planOperation({
      resource: /\/runs\//,
      status: "Failed",
      error: { code: "QuotaExceeded", message: "The registry has reached its concurrent run limit." },
    });
    const error = (await builds()
      .scheduleRun(registry, {
        source_location: (await activities(contextDir(true)).upload(input)).source_location,
        dockerfile: "jobapi/Dockerfile",
        image_names: ["x:1"],
        timeout_seconds: 600,
      })
      .catch((e: unknown) => e)) as Error;
    expect(error.message).toBe("QuotaExceeded: The registry has reached its concurrent run limit.");
  });

  it("a refused scheduleRun (no push right) is ARM's AuthorizationFailed, and a SAS URL with a wrong signature is refused", async () => {
    const undo = world.arm.deny({ action: "Microsoft.ContainerRegistry/registries/scheduleRun/action" });
    try {
      const error = (await builds()
        .scheduleRun(registry, {
          source_location: "source/x.tar.gz",
          dockerfile: "jobapi/Dockerfile",
          image_names: ["x:1"],
          timeout_seconds: 600,
        })
        .catch((e: unknown) => e)) as { statusCode?: number; code?: string };
      expect(error).toMatchObject({ statusCode: 403, code: "AuthorizationFailed" });
    } finally {
      undo();
    }
    const forged = world.arm.sasUrl("blastcr/source/forged.tar.gz").replace(/sig=[^&]+/, "sig=forged");
    const status = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        forged,
        { method: "PUT", ca: world.ca, headers: { "x-ms-blob-type": "BlockBlob" } },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", reject);
      req.end("x");
    });
    expect(status).toBe(403);
  });
});
