import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { testCertificate } from "../support/test-certificate.js";

/** Which Azure service the fake speaks for, and so which refusal it answers. */
export type Refusal =
  | "blob"
  | "table"
  | "keyvault-read"
  | "keyvault-write"
  | "arm"
  | "arm-role-assignment"
  | "arm-cluster-credentials"
  | "kubernetes";

const CLIENT = "5c1b3a9e-0000-4000-8000-0000000000aa";
const SUBSCRIPTION = "/subscriptions/00000000-0000-4000-8000-000000000001";

/**
 * A TLS endpoint on loopback that refuses every authenticated call the way the Azure service
 * `refusal` names does when the caller lacks a role: the status, headers and body of the real REST
 * API (storage's XML and OData errors with `x-ms-error-code`, Key Vault's `ForbiddenByRbac` inner
 * error after its bearer challenge, ARM's `AuthorizationFailed`, the API server's `Forbidden`
 * Status). Real SDK clients call it (their `tlsOptions.ca` trusts its certificate); with `tls: false`
 * it serves plain HTTP, for the Blob SDK, which takes no CA option (it is then reached with a
 * shared-key connection string: the refusal it answers is the same).
 */
export async function startRefusalServer(
  refusal: Refusal,
  options: { tls?: boolean } = {},
): Promise<{ url: string; ca: string; requests: string[]; close(): Promise<void> }> {
  const certificate = testCertificate();
  const ca = certificate.cert;
  const requests: string[] = [];
  const handler: http.RequestListener = (req, res) => {
    requests.push(`${req.method} ${req.url}`);
    req.resume();
    const requestId = "6a1b2c3d-0001-0002-0003-000000000004";
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      res
        .writeHead(status, { "Content-Type": "application/json; charset=utf-8", ...headers })
        .end(JSON.stringify(body));
    const storageMessage = `This request is not authorized to perform this operation using this permission.\nRequestId:${requestId}\nTime:2026-11-26T01:00:00.0000000Z`;
    switch (refusal) {
      case "blob":
        res
          .writeHead(403, {
            "Content-Type": "application/xml",
            "x-ms-error-code": "AuthorizationPermissionMismatch",
            "x-ms-request-id": requestId,
          })
          .end(
            `\uFEFF<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthorizationPermissionMismatch</Code><Message>${storageMessage}</Message></Error>`,
          );
        return;
      case "table":
        json(
          403,
          {
            "odata.error": {
              code: "AuthorizationPermissionMismatch",
              message: { lang: "en-US", value: storageMessage },
            },
          },
          {
            "Content-Type": "application/json;odata=minimalmetadata;streaming=true;charset=utf-8",
            "x-ms-error-code": "AuthorizationPermissionMismatch",
            "x-ms-request-id": requestId,
          },
        );
        return;
      case "keyvault-read":
      case "keyvault-write": {
        if (!req.headers.authorization) {
          json(
            401,
            { error: { code: "Unauthorized", message: "AKV10000: Request is missing a Bearer or PoP token." } },
            {
              "WWW-Authenticate":
                'Bearer authorization="https://login.microsoftonline.com/00000000-0000-0000-0000-000000000000", resource="https://vault.azure.net"',
            },
          );
          return;
        }
        const action = refusal === "keyvault-write" ? "setSecret" : "getSecret";
        json(403, {
          error: {
            code: "Forbidden",
            message:
              "Caller is not authorized to perform action on resource.\r\nIf role assignments, deny assignments or role definitions were changed recently, please observe propagation time.\r\n" +
              `Caller: appid=${CLIENT};oid=7f000000-0000-4000-8000-000000000002;iss=https://sts.windows.net/00000000-0000-0000-0000-000000000000/\r\n` +
              `Action: 'Microsoft.KeyVault/vaults/secrets/${action}/action'\r\n` +
              `Resource: '${SUBSCRIPTION.toLowerCase()}/resourcegroups/rg-blastplane/providers/microsoft.keyvault/vaults/kv-blastplane/secrets/jobapi-token'\r\n` +
              "Assignment: (not found)\r\nDenyAssignmentId: null\r\nDecisionReason: null \r\nVault: kv-blastplane;location=westeurope\r\n",
            innererror: { code: "ForbiddenByRbac" },
          },
        });
        return;
      }
      case "arm":
      case "arm-role-assignment":
      case "arm-cluster-credentials": {
        const action =
          refusal === "arm-role-assignment"
            ? "Microsoft.Authorization/roleAssignments/write"
            : refusal === "arm-cluster-credentials"
              ? "Microsoft.ContainerService/managedClusters/listClusterUserCredential/action"
              : "Microsoft.ContainerService/managedClusters/read";
        const scope = `${SUBSCRIPTION}/resourceGroups/rg-blastplane/providers/Microsoft.ContainerService/managedClusters/aks-blastplane`;
        json(
          403,
          {
            error: {
              code: "AuthorizationFailed",
              message: `The client '${CLIENT}' with object id '${CLIENT}' does not have authorization to perform action '${action}' over scope '${scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.`,
            },
          },
          { "x-ms-failure-cause": "gateway" },
        );
        return;
      }
      case "kubernetes":
        json(403, {
          kind: "Status",
          apiVersion: "v1",
          metadata: {},
          status: "Failure",
          message:
            'jobs.batch is forbidden: User "system:serviceaccount:blastplane:blastplane-jobapi" cannot list resource "jobs" in API group "batch" in the namespace "blastplane"',
          reason: "Forbidden",
          details: { group: "batch", kind: "jobs" },
          code: 403,
        });
        return;
    }
  };
  const tls = options.tls ?? true;
  const server = tls ? https.createServer({ key: certificate.key, cert: ca }, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${tls ? "https" : "http"}://127.0.0.1:${port}`,
    ca,
    requests,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
