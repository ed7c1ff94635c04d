import type { DeploymentsClient, DeploymentsClientOptionalParams } from "@azure/arm-resourcesdeployments";
import type { TokenCredential } from "@azure/identity";
import type { DeploymentHistoryProvider, DeploymentRecord } from "./providers.js";

/** ARM deployments read per call at most; more makes the answer say it was truncated. */
const MAX_SCANNED = 5000;

/**
 * `query_deployments`' cloud history: the ARM deployments of the server-configured resource group
 * (`deployments.listByResourceGroup`, every page), with the SDK loaded on first use. Only the
 * name, time, provisioning state, duration, mode and correlation id leave the provider — no ids,
 * parameters or outputs (which can hold secrets).
 */
export function createArmDeploymentsProvider(options: {
  subscriptionId: string;
  resourceGroup: string;
  credential: TokenCredential;
  clientOptions?: DeploymentsClientOptionalParams;
}): DeploymentHistoryProvider {
  let client: Promise<DeploymentsClient> | undefined;
  return {
    async list(window, limit) {
      client ??= import("@azure/arm-resourcesdeployments").then(
        ({ DeploymentsClient }) =>
          new DeploymentsClient(options.credential, options.subscriptionId, options.clientOptions),
      );
      const records: DeploymentRecord[] = [];
      let scanned = 0;
      let truncated = false;
      for await (const deployment of (await client).deployments.listByResourceGroup(options.resourceGroup)) {
        if (++scanned > MAX_SCANNED) {
          truncated = true;
          break;
        }
        const at = deployment.properties?.timestamp;
        if (!at || at < window.start || at > window.end) continue;
        const p = deployment.properties;
        records.push({
          at: at.toISOString(),
          source: "cloud",
          kind: "arm.deployment",
          name: deployment.name ?? "",
          detail: {
            provisioning_state: String(p?.provisioningState ?? "Unknown"),
            duration: p?.duration ?? "",
            mode: String(p?.mode ?? ""),
            correlation_id: p?.correlationId ?? "",
          },
        });
      }
      records.sort((a, b) => b.at.localeCompare(a.at));
      return { records: records.slice(0, limit), truncated: truncated || records.length > limit };
    },
  };
}
