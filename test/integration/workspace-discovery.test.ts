import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedRegistry } from "../../local/arm/providers/container-registry.js";
import { seedVault } from "../../local/arm/providers/key-vault.js";
import { seedResourceGroup } from "../../local/arm/providers/resources.js";
import { seedStorageAccount } from "../../local/arm/providers/storage.js";
import { CloudAuthorizationError } from "../../shared/auth/cloud-authorization.js";
import { createWorkspaceDiscovery } from "../../shared/cluster/discovery.js";
import { ARM_WORLD, type LocalArmWorld, startLocalArmWorld } from "../support/local-arm.js";

let world: LocalArmWorld;
const at = { subscriptionId: ARM_WORLD.subscriptionId, resourceGroup: ARM_WORLD.resourceGroup, location: "eastus" };

beforeAll(async () => {
  // Two items a page, so every list below crosses at least one nextLink.
  world = await startLocalArmWorld({ pageSize: 2 });
  seedResourceGroup(world.arm.store, ARM_WORLD.subscriptionId, "rg-other");
  for (const name of ["blastdata1", "blastdata2", "blastdata3"]) seedStorageAccount(world.arm, at, name);
  seedStorageAccount(world.arm, { ...at, resourceGroup: "rg-other" }, "elsewhere1");
  seedRegistry(world.arm, at, "blastacr01");
  seedVault(world.arm, at, "kv-blast");
});
afterAll(async () => {
  await world?.close();
});

const discovery = () => createWorkspaceDiscovery({ credential: world.credential, clientOptions: world.clientOptions });

describe("workspace discovery through the real SDK clients against the local Resource Manager", () => {
  it("B-025 lists the subscription, resource groups, storage accounts and registry the identity can see, across pages", async () => {
    const d = discovery();
    expect((await d.list("subscriptions")).items).toEqual([
      {
        name: ARM_WORLD.subscriptionId,
        id: `/subscriptions/${ARM_WORLD.subscriptionId}`,
        detail: ARM_WORLD.subscriptionName,
      },
    ]);
    expect((await d.list("resource_groups", ARM_WORLD.subscriptionId)).items.map((g) => g.name)).toEqual([
      ARM_WORLD.resourceGroup,
      "rg-other",
    ]);
    const accounts = await d.list("storage_accounts", ARM_WORLD.subscriptionId);
    expect(accounts.items.map((a) => [a.name, a.resource_group])).toEqual([
      ["blastdata1", ARM_WORLD.resourceGroup],
      ["blastdata2", ARM_WORLD.resourceGroup],
      ["blastdata3", ARM_WORLD.resourceGroup],
      ["elsewhere1", "rg-other"],
    ]);
    expect((await d.list("storage_accounts", ARM_WORLD.subscriptionId, "rg-other")).items.map((a) => a.name)).toEqual([
      "elsewhere1",
    ]);
    expect((await d.list("registries", ARM_WORLD.subscriptionId)).items).toEqual([
      expect.objectContaining({ name: "blastacr01", detail: "blastacr01.azurecr.io" }),
    ]);
    expect((await d.list("vaults", ARM_WORLD.subscriptionId)).items.map((v) => v.name)).toEqual(["kv-blast"]);
    expect((await d.list("clusters", ARM_WORLD.subscriptionId)).items).toEqual([]);
    // The storage list took two pages (nextLink) for four accounts.
    expect(
      world.arm.requests.filter(
        (r) => r.path === `/subscriptions/${ARM_WORLD.subscriptionId}/providers/Microsoft.Storage/storageAccounts`,
      ).length,
    ).toBe(2);
  });

  it("stops at the limit and says the list was cut", async () => {
    const page = await createWorkspaceDiscovery(
      { credential: world.credential, clientOptions: world.clientOptions },
      { limit: 3 },
    ).list("storage_accounts", ARM_WORLD.subscriptionId);
    expect(page.items).toHaveLength(3);
    expect(page.truncated).toBe(true);
  });

  it("a refused list names the role to assign and the scope (spec §7 AuthorizationFailed)", async () => {
    const undo = world.arm.deny({ action: "Microsoft.Storage/storageAccounts/read" });
    try {
      const error = await discovery()
        .list("storage_accounts", ARM_WORLD.subscriptionId)
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CloudAuthorizationError);
      expect((error as CloudAuthorizationError).message).toBe(
        `AuthorizationFailed: the managed identity may not list storage accounts (Microsoft.Storage/storageAccounts/read) in /subscriptions/${ARM_WORLD.subscriptionId}; assign it the Reader role on /subscriptions/${ARM_WORLD.subscriptionId} (a new role assignment takes 1 to 5 minutes to take effect)`,
      );
    } finally {
      undo();
    }
  });
});
