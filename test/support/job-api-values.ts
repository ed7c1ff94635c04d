import type { JobApiValues } from "../../shared/cluster/job-api-manifests.js";

/** A workspace's job-API render values as the tests use them (AKS-shaped names); override what a test is about. */
export function sampleJobApiValues(overrides: Partial<JobApiValues> = {}): JobApiValues {
  return {
    namespace: "blastplane",
    registry: "blastplanecr.azurecr.io",
    image_digest: `sha256:${"a".repeat(64)}`,
    workload_identity_client_id: "22222222-2222-4222-8222-222222222222",
    key_vault_url: "https://blastplane-kv.vault.azure.net/",
    storage_account_name: "blastplanedata",
    app_subnet_cidr: "10.1.0.0/24",
    auth_client_id: "00000000-0000-4000-8000-000000000001",
    auth_tenant_id: "00000000-0000-4000-8000-000000000000",
    web_app_origin: "",
    ...overrides,
  };
}
