import { describe, expect, it } from "vitest";
import { ValidationError } from "../../shared/errors.js";
import { type HttpRequestLike, parseJsonBody } from "../../shared/http/validation.js";
import { type Workspace, workspaceSchema } from "../../shared/workspace/workspace.js";

const valid: Workspace = {
  subscription_id: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
  resource_group: "rg-blast_prod.(eu)-1",
  location: "westeurope",
  storage_account: "blaststore01",
  registry: "blastacr01",
  cluster_name: "aks-blast_01",
  node_size: "Standard_D4s_v5",
  node_count: 3,
};

/** The issues the schema raises for `valid` with `patch` applied (undefined deletes the field). */
function issues(patch: Record<string, unknown>) {
  const input: Record<string, unknown> = { ...valid, ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === undefined) delete input[k];
  const parsed = workspaceSchema.safeParse(input);
  return parsed.success ? [] : parsed.error.issues.map((i) => ({ path: i.path.join("."), message: i.message }));
}

function request(body: unknown): HttpRequestLike {
  return {
    method: "PUT",
    url: "http://localhost/api/workspace",
    headers: new Headers({ "content-type": "application/json" }),
    query: new URLSearchParams(),
    params: {},
    text: async () => JSON.stringify(body),
  };
}

describe("workspace schema", () => {
  it("B-002 accepts a complete workspace", () => {
    expect(workspaceSchema.parse(valid)).toEqual(valid);
  });

  it.each([
    ["subscription_id", "0B1C2D3E-4F50-6172-8394-A5B6C7D8E9F0"],
    ["resource_group", "a"],
    ["resource_group", "r".repeat(90)],
    ["resource_group", "Ressourcengruppe-Müller"],
    ["resource_group", "(rg)"],
    ["location", "eastus2"],
    ["location", "eastus2euap"],
    ["location", "southcentralus"],
    ["storage_account", "abc"],
    ["storage_account", "a".repeat(24)],
    ["registry", "acr01"],
    ["registry", "MyRegistry2024"],
    ["registry", "r".repeat(50)],
    ["cluster_name", "a"],
    ["cluster_name", "A".repeat(63)],
    ["cluster_name", "aks_blast-01"],
    ["node_size", "Standard_E64-32s_v5"],
    ["node_size", "Standard_NC24ads_A100_v4"],
    ["node_size", "Standard_B2ms"],
    ["node_size", "Basic_A1"],
    ["node_count", 1],
    ["node_count", 100],
  ])("accepts %s = %j", (field, value) => {
    expect(issues({ [field]: value })).toEqual([]);
  });

  it.each([
    ["subscription_id", "not-a-guid"],
    ["subscription_id", "0b1c2d3e4f5061728394a5b6c7d8e9f0"],
    ["subscription_id", "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f"],
    ["subscription_id", "{0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0}"],
    ["resource_group", ""],
    ["resource_group", "r".repeat(91)],
    ["resource_group", "rg."],
    ["resource_group", "rg name"],
    ["resource_group", "rg/name"],
    ["resource_group", "rg#1"],
    ["location", "West Europe"],
    ["location", "WestEurope"],
    ["location", "west-europe"],
    ["location", "2westeurope"],
    ["location", "we"],
    ["storage_account", "ab"],
    ["storage_account", "a".repeat(25)],
    ["storage_account", "BlastStore"],
    ["storage_account", "blast-store"],
    ["registry", "acr1"],
    ["registry", "r".repeat(51)],
    ["registry", "blast-acr"],
    ["registry", "blast_acr"],
    ["cluster_name", ""],
    ["cluster_name", "a".repeat(64)],
    ["cluster_name", "-aks"],
    ["cluster_name", "aks-"],
    ["cluster_name", "_aks"],
    ["cluster_name", "aks_"],
    ["cluster_name", "aks.blast"],
    ["node_size", "D4s_v5"],
    ["node_size", "standard_D4s_v5"],
    ["node_size", "Standard_D"],
    ["node_size", "Standard_D4s v5"],
    ["node_size", "Standard_D4s__v5"],
    ["node_size", `Standard_D4s_${"v".repeat(60)}`],
    ["node_count", 0],
    ["node_count", 101],
    ["node_count", 2.5],
    ["node_count", "3"],
    ["node_count", -1],
  ])("refuses %s = %j, naming that field", (field, value) => {
    const found = issues({ [field]: value });
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((i) => i.path === field)).toBe(true);
  });

  it("refuses a resource group ending in '.' with a message saying so", () => {
    expect(issues({ resource_group: "rg." })).toEqual([
      { path: "resource_group", message: expect.stringContaining("must not end with '.'") },
    ]);
  });

  it.each(["resource_group", "cluster_name"])(
    "issue 23 refuses an empty %s with one sentence, not 'must not be empty may contain…'",
    (field) => {
      expect(issues({ [field]: "" })).toEqual([{ path: field, message: "must not be empty" }]);
    },
  );

  it.each(Object.keys(valid))("refuses a workspace without %s", (field) => {
    expect(issues({ [field]: undefined })).toEqual([{ path: field, message: expect.any(String) }]);
  });

  it("refuses unknown fields (strict)", () => {
    const parsed = workspaceSchema.safeParse({ ...valid, admin_password: "x" });
    expect(parsed.success).toBe(false);
  });

  it("B-125 reports every failing field as a 422 loc/msg/type list", async () => {
    const body = { ...valid, location: "West Europe", node_count: 0, storage_account: undefined, extra: true };
    const error = await parseJsonBody(request(body), workspaceSchema).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    const detail = (error as ValidationError).issues;
    expect(detail).toEqual(
      expect.arrayContaining([
        { loc: ["body", "location"], msg: expect.any(String), type: "string_pattern_mismatch" },
        { loc: ["body", "node_count"], msg: "must be at least 1", type: "greater_than_equal" },
        { loc: ["body", "storage_account"], msg: "field required", type: "missing" },
        { loc: ["body", "extra"], msg: "unknown field 'extra'", type: "extra_forbidden" },
      ]),
    );
    expect(detail).toHaveLength(4);
  });
});
