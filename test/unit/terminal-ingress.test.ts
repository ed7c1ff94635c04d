/**
 * The browser terminal in Azure (issue 30, decision 0022): an ingress of the AKS application routing
 * add-on exposes `/v1/terminal` only, with a Key Vault certificate; the cluster gets the add-on; the
 * Function App's settings and the post-provision hook give the web app its `terminal_url`.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import type { ManagedCluster } from "@azure/arm-containerservice";
import { Ingress } from "kubernetes-models/networking.k8s.io/v1";
import { describe, expect, it } from "vitest";
import { clusterMatches, desiredCluster } from "../../shared/cluster/cluster-provisioning.js";
import {
  type JobApiValues,
  jobApiValuesSchema,
  renderJobApiManifests,
  TERMINAL_INGRESS,
} from "../../shared/cluster/job-api-manifests.js";
import { APP_ROUTING_INGRESS_CLASS } from "../../shared/cluster/terminal-ingress.js";
import { loadConfig } from "../../shared/config/load-config.js";

const ROOT = path.resolve(import.meta.dirname, "../..");
const CERT = "https://kv-blastplane.vault.azure.net/certificates/terminal-tls";
const VALUES: JobApiValues = {
  namespace: "blastplane",
  registry: "blastplanecr.azurecr.io",
  image_digest: `sha256:${"a".repeat(64)}`,
  workload_identity_client_id: "22222222-2222-4222-8222-222222222222",
  key_vault_url: "https://kv-blastplane.vault.azure.net/",
  storage_account_name: "blastplanedata",
  app_subnet_cidr: "10.1.0.0/24",
  auth_client_id: "33333333-3333-4333-8333-333333333333",
  auth_tenant_id: "44444444-4444-4444-8444-444444444444",
  web_app_origin: "https://portal.example",
  terminal_host: "terminal.example.org",
  terminal_tls_cert_uri: CERT,
};
const ingressOf = (values: JobApiValues) =>
  renderJobApiManifests(values).find((o) => o.kind === "Ingress" && o.metadata.name === TERMINAL_INGRESS);

describe("the terminal's ingress in the rendered job API manifests", () => {
  it("exposes exactly /v1/terminal of the job API's Service on the host, with TLS from the Key Vault certificate", () => {
    const ingress = ingressOf(VALUES) as unknown as Ingress;
    expect(() => new Ingress(ingress).validate()).not.toThrow();
    expect(ingress.metadata?.namespace).toBe("blastplane");
    expect(ingress.metadata?.annotations).toMatchObject({ "kubernetes.azure.com/tls-cert-keyvault-uri": CERT });
    // NGINX must not cut a session the job API keeps (max session 3600 s, idle 900 s).
    const timeouts = ["proxy-read-timeout", "proxy-send-timeout"].map((k) =>
      Number(ingress.metadata?.annotations?.[`nginx.ingress.kubernetes.io/${k}`]),
    );
    for (const t of timeouts) expect(t).toBeGreaterThan(3600);
    expect(ingress.spec?.ingressClassName).toBe(APP_ROUTING_INGRESS_CLASS);
    expect(ingress.spec?.tls).toEqual([
      { hosts: ["terminal.example.org"], secretName: "keyvault-blastplane-terminal" },
    ]);
    expect(ingress.spec?.defaultBackend).toBeUndefined();
    expect(ingress.spec?.rules).toEqual([
      {
        host: "terminal.example.org",
        http: {
          paths: [
            {
              path: "/v1/terminal",
              pathType: "Exact",
              backend: { service: { name: "blastplane-jobapi", port: { name: "http" } } },
            },
          ],
        },
      },
    ]);
  });

  it("is not rendered without a host and certificate, or when the terminal does not run (no web app origin)", () => {
    expect(ingressOf({ ...VALUES, terminal_host: "", terminal_tls_cert_uri: "" })).toBeUndefined();
    const { terminal_host: _h, terminal_tls_cert_uri: _c, ...without } = VALUES;
    expect(ingressOf(without)).toBeUndefined();
    expect(ingressOf({ ...VALUES, web_app_origin: "" })).toBeUndefined();
    // The other objects do not change with it.
    expect(renderJobApiManifests(without).map((o) => o.kind)).toEqual(
      renderJobApiManifests(VALUES)
        .map((o) => o.kind)
        .filter((k) => k !== "Ingress"),
    );
  });

  it("the job API's NetworkPolicy admits the add-on's ingress controller namespace", () => {
    const policy = renderJobApiManifests(VALUES).find((o) => o.kind === "NetworkPolicy");
    expect(JSON.stringify(policy)).toContain('"kubernetes.io/metadata.name":"app-routing-system"');
  });

  it("the values refuse a host without a certificate, and either one malformed", () => {
    expect(jobApiValuesSchema.safeParse({ ...VALUES, terminal_tls_cert_uri: "" }).success).toBe(false);
    expect(jobApiValuesSchema.safeParse({ ...VALUES, terminal_host: "" }).success).toBe(false);
    expect(jobApiValuesSchema.safeParse({ ...VALUES, terminal_host: "terminal.example.org/x" }).success).toBe(false);
    expect(jobApiValuesSchema.safeParse({ ...VALUES, terminal_host: "http://terminal.example.org" }).success).toBe(
      false,
    );
    // A versioned URI pins one certificate version: rotations in the vault would never reach the ingress.
    expect(jobApiValuesSchema.safeParse({ ...VALUES, terminal_tls_cert_uri: `${CERT}/0123abcd` }).success).toBe(false);
    expect(jobApiValuesSchema.safeParse({ ...VALUES, terminal_tls_cert_uri: "https://example.org/cert" }).success).toBe(
      false,
    );
  });
});

describe("the Function App's terminal ingress settings", () => {
  const APP = {
    AzureWebJobsStorage: "UseDevelopmentStorage=true",
    AUTH_TENANT_ID: "44444444-4444-4444-8444-444444444444",
    AUTH_CLIENT_ID: "33333333-3333-4333-8333-333333333333",
  };

  it("gives the deploy both, and refuses one without the other at start", () => {
    expect(
      loadConfig({ ...APP, JOBAPI_TERMINAL_HOST: "Terminal.Example.org", JOBAPI_TERMINAL_TLS_CERT_URI: CERT })
        .jobApiDeploy.terminalIngress,
    ).toEqual({ host: "terminal.example.org", tlsCertificateUri: CERT });
    expect(loadConfig(APP).jobApiDeploy.terminalIngress).toBeUndefined();
    expect(() => loadConfig({ ...APP, JOBAPI_TERMINAL_HOST: "terminal.example.org" })).toThrow(
      /JOBAPI_TERMINAL_TLS_CERT_URI/,
    );
    expect(() => loadConfig({ ...APP, JOBAPI_TERMINAL_TLS_CERT_URI: CERT })).toThrow(/JOBAPI_TERMINAL_HOST/);
    expect(() =>
      loadConfig({ ...APP, JOBAPI_TERMINAL_HOST: "not a host", JOBAPI_TERMINAL_TLS_CERT_URI: CERT }),
    ).toThrow(/JOBAPI_TERMINAL_HOST/);
  });
});

describe("the cluster the product provisions runs the application routing add-on", () => {
  const TARGET = {
    subscription_id: "00000000-0000-4000-8000-000000000001",
    resource_group: "rg",
    cluster_name: "aks",
    location: "westeurope",
    system_vm_size: "Standard_D2s_v5",
  } as Parameters<typeof desiredCluster>[0];

  it("asks for web app routing and the Key Vault secrets provider, keeping the add-ons the cluster already has", () => {
    expect(desiredCluster(TARGET)).toMatchObject({
      ingressProfile: { webAppRouting: { enabled: true } },
      addonProfiles: { azureKeyvaultSecretsProvider: { enabled: true } },
    });
    const current: ManagedCluster = {
      location: "westeurope",
      addonProfiles: { omsagent: { enabled: true, config: { logAnalyticsWorkspaceResourceID: "/x" } } },
      ingressProfile: { webAppRouting: { enabled: false, dnsZoneResourceIds: ["/zone"] } },
    };
    expect(desiredCluster(TARGET, current)).toMatchObject({
      addonProfiles: {
        omsagent: { enabled: true, config: { logAnalyticsWorkspaceResourceID: "/x" } },
        azureKeyvaultSecretsProvider: { enabled: true },
      },
      ingressProfile: { webAppRouting: { enabled: true, dnsZoneResourceIds: ["/zone"] } },
    });
  });

  it("a cluster without the add-on is updated, one with it is left alone", () => {
    const ready: ManagedCluster = {
      location: "westeurope",
      provisioningState: "Succeeded",
      oidcIssuerProfile: { enabled: true },
      securityProfile: { workloadIdentity: { enabled: true } },
      aadProfile: { enableAzureRbac: true },
      agentPoolProfiles: [{ name: "system", mode: "System" }],
      ingressProfile: { webAppRouting: { enabled: true } },
      addonProfiles: { azureKeyvaultSecretsProvider: { enabled: true } },
    };
    expect(clusterMatches(ready, TARGET)).toBe(true);
    expect(clusterMatches({ ...ready, ingressProfile: undefined }, TARGET)).toBe(false);
    expect(clusterMatches({ ...ready, addonProfiles: {} }, TARGET)).toBe(false);
  });
});

describe("Bicep and the post-provision hook", () => {
  const bicep = (file: string) => readFileSync(path.join(ROOT, "infra", file), "utf8");

  it("Bicep passes terminalHost and terminalCertificateName to the Function App and outputs TERMINAL_HOST", () => {
    expect(bicep("main.bicep")).toMatch(/param terminalHost string = ''/);
    expect(bicep("main.bicep")).toMatch(/param terminalCertificateName string = ''/);
    expect(bicep("main.bicep")).toMatch(/output TERMINAL_HOST string = terminalHost/);
    const app = bicep("modules/function-app.bicep");
    expect(app).toContain("{ name: 'JOBAPI_TERMINAL_HOST', value: terminalHost }");
    // Bicep's own interpolation, written without a JavaScript template.
    const certificateUri = ["'$", "{keyVaultUri}certificates/$", "{terminalCertificateName}'"].join("");
    expect(app).toContain(`{ name: 'JOBAPI_TERMINAL_TLS_CERT_URI', value: ${certificateUri} }`);
    // Both settings only with a host: without it the app starts with neither.
    expect(app).toMatch(/empty\(terminalHost\)\s*\?\s*\[\]/);
    const parameters = JSON.parse(bicep("main.parameters.json")) as { parameters: Record<string, { value: string }> };
    // azd's `$` + `{NAME=}`: the environment's value, empty when unset.
    expect(parameters.parameters.terminalHost?.value).toBe(`$${"{"}TERMINAL_HOST=}`);
    expect(parameters.parameters.terminalCertificateName?.value).toBe(`$${"{"}TERMINAL_CERTIFICATE_NAME=}`);
  });

  it("writes terminal_url wss://<host>/v1/terminal into /web-config.json when a terminal host is provisioned, and none otherwise", async () => {
    const { webConfigFromOutputs } = await import("../../scripts/write-web-config.mjs");
    const { webConfigSchema } = await import("../../web/src/config.js");
    const outputs = {
      AUTH_TENANT_ID: "22222222-2222-2222-2222-222222222222",
      AUTH_CLIENT_ID: "33333333-3333-3333-3333-333333333333",
      API_BASE_URL: "https://func-abc.azurewebsites.net/",
    };
    expect(
      webConfigSchema.parse(webConfigFromOutputs({ ...outputs, TERMINAL_HOST: "Terminal.Example.org" })),
    ).toMatchObject({ terminal_url: "wss://terminal.example.org/v1/terminal" });
    expect((webConfigFromOutputs(outputs) as { terminal_url: string }).terminal_url).toBe("");
    expect(() => webConfigFromOutputs({ ...outputs, TERMINAL_HOST: "https://terminal.example.org" })).toThrow(
      /TERMINAL_HOST must be a DNS name/,
    );
  });

  it("adds the terminal's wss:// origin to the Static Web App's connect-src once", async () => {
    const { cspWithTerminal } = await import("../../scripts/write-web-config.mjs");
    const swa = JSON.parse(readFileSync(path.join(ROOT, "web/public/staticwebapp.config.json"), "utf8")) as {
      globalHeaders: Record<string, string>;
    };
    const csp = swa.globalHeaders["content-security-policy"] as string;
    const url = "wss://terminal.example.org/v1/terminal";
    const widened = cspWithTerminal(csp, url);
    const connect = (policy: string) =>
      policy
        .split(";")
        .map((d) => d.trim())
        .find((d) => d.startsWith("connect-src"));
    expect(connect(widened)).toBe(`${connect(csp)} wss://terminal.example.org`);
    expect(cspWithTerminal(widened, url)).toBe(widened);
    expect(cspWithTerminal(csp, "")).toBe(csp);
    // Nothing else of the policy changes.
    expect(widened.replace(" wss://terminal.example.org", "")).toBe(csp);
  });
});
