import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "../../shared/logging/logger.js";
import { devManagedIdentityIssuer } from "../dev-idp.js";
import { type LocalCluster, servingCertificate } from "../kube/cluster.js";
import type { LocalImage } from "../kube/kubelet.js";
import { jwksTokenVerifier } from "./auth.js";
import { kubeClusterBackend } from "./kube-backend.js";
import { seedRegistry } from "./providers/container-registry.js";
import { localArmProviders } from "./providers/index.js";
import { seedVault } from "./providers/key-vault.js";
import { seedResourceGroup, seedSubscription } from "./providers/resources.js";
import { seedStorageAccount } from "./providers/storage.js";
import { type LocalArm, startLocalArm } from "./server.js";

/** What the local stack's Resource Manager holds at start: one subscription with what a workspace names. */
export const LOCAL_ARM_WORLD = {
  subscriptionId: "0b1a5700-0000-4000-8000-00000000a2a2",
  subscriptionName: "blastplane (local)",
  resourceGroup: "rg-blastplane",
  location: "westeurope",
  storageAccount: "blastplanedata",
  registry: "blastplanecr",
  vault: "blastplane-kv",
} as const;

export interface StackArm {
  arm: LocalArm;
  /** The PEM file of its certificate (self-signed CA), for `ARM_CA_FILE`. */
  caFile: string;
  close(): Promise<void>;
}

/**
 * The local stack's Resource Manager: `local/arm` on loopback TLS (certificate kept under
 * `<dataDir>/arm-pki`), accepting the development identity provider's managed-identity tokens,
 * seeded with {@link LOCAL_ARM_WORLD}; its managed clusters are the local Kubernetes API's node
 * pools ({@link kubeClusterBackend}) and the images its registry runs build are images that API's
 * kubelet can run. Its resources and operations are kept in `<dataDir>/arm-state.json`, and it
 * listens on the port it had before (`<dataDir>/arm-port`) when that is free: a stack killed
 * mid-provisioning and started again finds the cluster being created, its operation where it was
 * (the orchestration's saved poll URL still answers), and gives the local Kubernetes API its
 * clusters' nodes and built images back.
 */
export async function startStackArm(options: {
  dataDir: string;
  tenantId: string;
  jwksUrl: string;
  cluster: Pick<LocalCluster, "syncNodes" | "kubeconfigPath" | "images">;
  /** What an image a registry run built is on this machine: the project's build (its WORKDIR and CMD). */
  builtImage: Omit<LocalImage, "pattern">;
  logger: Logger;
  port?: number;
}): Promise<StackArm> {
  const pki = path.join(options.dataDir, "arm-pki");
  const { key, cert } = servingCertificate(pki);
  const portFile = path.join(options.dataDir, "arm-port");
  const previousPort = existsSync(portFile) ? Number(readFileSync(portFile, "utf8").trim()) : undefined;
  const start = (port: number | undefined) =>
    startLocalArm({
      key,
      cert,
      ...(port ? { port } : {}),
      stateFile: path.join(options.dataDir, "arm-state.json"),
      providers: localArmProviders({
        backend: kubeClusterBackend(options.cluster),
        // The kubelet runs an image a run built (pinned by its digest) as this project's build.
        onImageBuilt: (image) => {
          options.cluster.images.push({ pattern: new RegExp(`@${image.digest}$`), ...options.builtImage });
          options.logger.info("local registry built an image", { image: image.reference });
        },
      }),
      verifyToken: jwksTokenVerifier({ jwksUrl: options.jwksUrl, issuer: devManagedIdentityIssuer(options.tenantId) }),
      // As AKS answers: a few polls, a short Retry-After (the orchestrator waits at least 1 s).
      pollsBeforeDone: 2,
      retryAfterSeconds: 1,
    });
  let arm: LocalArm;
  const wanted = options.port ?? (previousPort && Number.isInteger(previousPort) ? previousPort : undefined);
  try {
    arm = await start(wanted);
  } catch (error) {
    if (options.port || (error as NodeJS.ErrnoException).code !== "EADDRINUSE") throw error;
    // Another process has the old port: a new one (an operation in flight then fails its next poll, and a retry resumes).
    options.logger.warn("local Resource Manager's previous port is taken; using another", { port: wanted });
    arm = await start(undefined);
  }
  writeFileSync(portFile, new URL(arm.url).port);
  if (arm.restored) {
    options.logger.info("local Resource Manager ready (state restored)", { url: arm.url });
    return { arm, caFile: path.join(pki, "apiserver.crt"), close: () => arm.close() };
  }
  const w = LOCAL_ARM_WORLD;
  seedSubscription(arm.store, {
    subscriptionId: w.subscriptionId,
    displayName: w.subscriptionName,
    tenantId: options.tenantId,
  });
  seedResourceGroup(arm.store, w.subscriptionId, w.resourceGroup, w.location);
  const at = { subscriptionId: w.subscriptionId, resourceGroup: w.resourceGroup, location: w.location };
  seedStorageAccount(arm, at, w.storageAccount);
  seedRegistry(arm, at, w.registry);
  seedVault(arm, at, w.vault);
  options.logger.info("local Resource Manager ready", { url: arm.url, subscription_id: w.subscriptionId });
  return { arm, caFile: path.join(pki, "apiserver.crt"), close: () => arm.close() };
}
