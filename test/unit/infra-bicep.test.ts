import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CONSOLE_SETTING_NAMES, loadConsoleConfig } from "../../shared/console/console-config.js";
import { APP_SETTING_NAMES, loadConfig } from "../../shared/config/load-config.js";
import { loadNotifyConfig, NOTIFY_SETTING_NAMES } from "../../shared/notify/notify-config.js";
import { CHANNEL_SETTING_NAMES } from "../../shared/channels/channel-config.js";

// No Bicep compiler installs on these machines (a .NET binary outside the npm registry), so these
// checks read the Bicep source and the JSON it loads with loadJsonContent: what `az bicep build`
// would not catch anyway (the wrong role, a key, a public account) is what they hold.
const ROOT = path.resolve(import.meta.dirname, "../..");
const INFRA = path.join(ROOT, "infra");
const bicepFiles = [
  "main.bicep",
  ...readdirSync(path.join(INFRA, "modules"))
    .filter((name) => name.endsWith(".bicep"))
    .map((name) => `modules/${name}`),
];
const bicep: Record<string, string> = Object.fromEntries(
  bicepFiles.map((file) => [file, readFileSync(path.join(INFRA, file), "utf8")]),
);
/** A Bicep file's text (the test fails naming it when it is missing). */
const source = (file: string): string => {
  const text = bicep[file];
  if (text === undefined) throw new Error(`infra/${file} is missing`);
  return text;
};
const allBicep = Object.values(bicep).join("\n");
const roles = JSON.parse(readFileSync(path.join(INFRA, "role-assignments.json"), "utf8")) as {
  roleDefinitionIds: Record<string, string>;
  identityRoles: { scope: string; role: string; optional?: boolean }[];
  hostRoles: { scope: string; role: string }[];
};

// Microsoft's built-in role definition ids (fixed GUIDs, the same in every tenant).
const BUILT_IN: Record<string, string> = {
  Contributor: "b24988ac-6180-42a0-ab88-20f7382dd24c",
  Reader: "acdd72a7-3385-48ef-bd42-f606fba81ae7",
  "Azure Kubernetes Service Cluster User Role": "4abbcc35-e782-43d8-92c5-2d3f1bd2253f",
  "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
  "Key Vault Secrets User": "4633458b-17de-408a-b874-0445c86b69e6",
  "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
  "Storage Table Data Contributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
  "Storage Queue Data Contributor": "974c5e8b-45b9-4653-ba55-5f855dd0a4b5",
  AcrPull: "7f951dda-4ed3-4680-a7ca-43fe172d538d",
  AcrPush: "8311e382-0749-4cb8-b61a-304f252e45ec",
  "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
};
// Roles that delegate access (spec §5: none is granted) or exceed what the spec lists.
const FORBIDDEN_ROLE_IDS = [
  "8e3af657-a8ff-443c-a75c-2fe8c4bcb635", // Owner
  "f58310d9-a9f6-439a-9e8d-f62e7b41a168", // Role Based Access Control Administrator (delegation)
  "17d1049b-9a84-46fb-8f53-869881c3d3ab", // Storage Account Contributor (reads keys)
  "81a9662b-bebf-436f-a333-f67b29880f12", // Storage Account Key Operator Service Role
];

/** The text of every `resource` block of `type` (not `existing` references), brace-matched. */
function resourceBlocks(text: string, type: string): string[] {
  const blocks: string[] = [];
  const pattern = new RegExp(
    `resource \\w+ '${type.replace("/", "\\/")}@[^']+'( existing)? = (?:\\[[^{]*|if \\([^{]*)?\\{`,
    "g",
  );
  for (const match of text.matchAll(pattern)) {
    if (match[1]) continue;
    let depth = 0;
    const start = (match.index ?? 0) + match[0].length - 1;
    for (let i = start; i < text.length; i++) {
      if (text[i] === "{") depth++;
      else if (text[i] === "}" && --depth === 0) {
        blocks.push(text.slice(start, i + 1));
        break;
      }
    }
  }
  return blocks;
}

describe("infra/: the identity's roles are exactly those of blast-control-plane.md §5", () => {
  const spec = [
    ["subscription", "Contributor"],
    ["subscription", "Reader"],
    ["subscription", "Azure Kubernetes Service Cluster User Role"],
    ["subscription", "User Access Administrator"],
    ["platformKeyVault", "Key Vault Secrets User"],
    ["platformStorage", "Storage Blob Data Contributor"],
    ["platformStorage", "Storage Table Data Contributor"],
    ["registry", "AcrPull"],
    ["registry", "AcrPush"],
    ["workloadStorage", "Storage Blob Data Contributor"],
  ];

  it("B-205 B-207 B-208 B-209 B-210: every row of the roles table, with the built-in role's id, and nothing else", () => {
    expect(roles.identityRoles.map((r) => [r.scope, r.role])).toEqual(spec);
    for (const [name, id] of Object.entries(roles.roleDefinitionIds)) expect(id, name).toBe(BUILT_IN[name]);
    for (const r of [...roles.identityRoles, ...roles.hostRoles]) expect(roles.roleDefinitionIds[r.role]).toBeTruthy();
  });

  it("B-206: User Access Administrator is best effort, behind a parameter that defaults off", () => {
    const uaa = roles.identityRoles.filter((r) => r.role === "User Access Administrator");
    expect(uaa).toEqual([expect.objectContaining({ scope: "subscription", optional: true })]);
    expect(source("main.bicep")).toMatch(/param grantRoleAssignmentWrite bool = false/);
    expect(source("main.bicep")).toMatch(/!contains\(r, 'optional'\) \|\| grantRoleAssignmentWrite/);
  });

  it("B-222: no delegation role, Owner or key-reading role anywhere in infra/", () => {
    const text = allBicep + JSON.stringify(roles);
    for (const id of FORBIDDEN_ROLE_IDS) expect(text).not.toContain(id);
  });

  it("every scope of the table is assigned by the Bicep (a filter on that scope feeds a roleAssignments resource)", () => {
    const scopes = new Set([...roles.identityRoles, ...roles.hostRoles].map((r) => r.scope));
    for (const scope of scopes) expect(allBicep, scope).toContain(`r.scope == '${scope}'`);
    expect(resourceBlocks(allBicep, "Microsoft.Authorization/roleAssignments").length).toBeGreaterThanOrEqual(6);
  });

  it("B-223: every role assignment is guid()-named from its scope, the identity's principal and the role (a recreated identity gets new ones)", () => {
    const blocks = resourceBlocks(allBicep, "Microsoft.Authorization/roleAssignments");
    for (const block of blocks) {
      expect(block).toMatch(/name: guid\(.*([pP]rincipalId|identity\.id).*\)\n/);
      expect(block).toMatch(/roleDefinitionId: subscriptionResourceId\(\s*'Microsoft\.Authorization\/roleDefinitions'/);
    }
  });
});

describe("infra/: no keys, private storage", () => {
  it("B-219 B-194: no listKeys, account key, SAS or storage connection string anywhere in infra/", () => {
    const files = [...bicepFiles.map(source), readFileSync(path.join(INFRA, "main.parameters.json"), "utf8")];
    for (const text of files) {
      expect(text).not.toMatch(
        /listKeys|listAccountSas|listServiceSas|AccountKey|SharedAccessSignature|DefaultEndpointsProtocol|sig=/i,
      );
      // The one connection string is Application Insights' endpoint string (no key: local auth is off).
      for (const line of text.split("\n").filter((l) => /connectionstring/i.test(l)))
        expect(line).toMatch(/APPLICATIONINSIGHTS_CONNECTION_STRING.*appInsights\.properties\.ConnectionString/);
    }
  });

  it("B-220 B-221 B-218: every storage account disables shared keys and public access and gets private endpoints; no file shares", () => {
    const accounts = resourceBlocks(allBicep, "Microsoft.Storage/storageAccounts");
    expect(accounts.length).toBeGreaterThanOrEqual(1);
    for (const account of accounts) {
      expect(account).toMatch(/allowSharedKeyAccess: false/);
      expect(account).toMatch(/publicNetworkAccess: 'Disabled'/);
      expect(account).toMatch(/allowBlobPublicAccess: false/);
    }
    const module = source("modules/storage-account.bicep");
    expect(module).toMatch(/Microsoft\.Network\/privateEndpoints@/);
    expect(module).toMatch(/groupIds: \[service\]/);
    // Both accounts are made by that module, each with its services' endpoints.
    expect(source("modules/resources.bicep").match(/module \w+ 'storage-account\.bicep'/g)).toHaveLength(2);
    expect(allBicep).not.toMatch(/fileServices|shares@|azureFile/i);
  });

  it("Key Vault is in RBAC mode with purge protection and private; the registry has no admin user; telemetry takes no key", () => {
    const [vault] = resourceBlocks(allBicep, "Microsoft.KeyVault/vaults");
    expect(vault).toMatch(/enableRbacAuthorization: true/);
    expect(vault).toMatch(/enablePurgeProtection: true/);
    expect(vault).toMatch(/publicNetworkAccess: 'Disabled'/);
    const [registry] = resourceBlocks(allBicep, "Microsoft.ContainerRegistry/registries");
    expect(registry).toMatch(/adminUserEnabled: false/);
    const [insights] = resourceBlocks(allBicep, "Microsoft.Insights/components");
    expect(insights).toMatch(/DisableLocalAuth: true/);
  });

  it("the AKS cluster is not created by the template (the product provisions it)", () => {
    expect(allBicep).not.toMatch(/Microsoft\.ContainerService\/managedClusters@/);
  });
});

describe("infra/: parameters, descriptions, names", () => {
  it("every parameter in main.parameters.json exists in main.bicep", () => {
    const parameters = JSON.parse(readFileSync(path.join(INFRA, "main.parameters.json"), "utf8")).parameters;
    for (const name of Object.keys(parameters))
      expect(source("main.bicep")).toMatch(new RegExp(`^param ${name} `, "m"));
  });

  it("every param and output of every file has an @description", () => {
    for (const [file, text] of Object.entries(bicep)) {
      const lines = text.split("\n");
      lines.forEach((line, i) => {
        if (!/^(param|output) /.test(line)) return;
        const above = lines.slice(Math.max(0, i - 4), i).join("\n");
        expect(above, `${file}:${i + 1} ${line}`).toMatch(/@description\(/);
      });
    }
  });

  it("every abbreviation the Bicep uses is in abbreviations.json", () => {
    const abbreviations = JSON.parse(readFileSync(path.join(INFRA, "abbreviations.json"), "utf8"));
    for (const [, key = ""] of allBicep.matchAll(/abbrs\.(\w+)/g)) expect(abbreviations, key).toHaveProperty(key);
  });
});

describe("infra/: the Function App's settings start the app", () => {
  const functionApp = source("modules/function-app.bicep");
  const settings = Object.fromEntries(
    [...functionApp.matchAll(/\{ name: '([A-Za-z0-9_]+)', value: (.+) \}$/gm)].map(([, name, value]) => [
      name,
      (value ?? "").trim(),
    ]),
  );
  // What the deployed values look like (Bicep expressions filled with plausible results).
  const filled: Record<string, string> = {
    AzureWebJobsStorage__accountName: "stpabc123",
    AzureWebJobsStorage__credential: "managedidentity",
    AzureWebJobsStorage__clientId: "11111111-1111-1111-1111-111111111111",
    AZURE_CLIENT_ID: "11111111-1111-1111-1111-111111111111",
    TASKHUB_NAME: "blastplane",
    AUTH_TENANT_ID: "22222222-2222-2222-2222-222222222222",
    AUTH_CLIENT_ID: "33333333-3333-3333-3333-333333333333",
    KEY_VAULT_URL: "https://kv-abc123.vault.azure.net/",
    SVC_SUBSCRIPTION_ID: "44444444-4444-4444-4444-444444444444",
    APPLICATIONINSIGHTS_CONNECTION_STRING: "InstrumentationKey=x;IngestionEndpoint=https://example.invalid/",
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: "ClientId=11111111-1111-1111-1111-111111111111;Authorization=AAD",
    SVC_CONSOLE_BASE_URL: "https://stapp-abc123.azurestaticapps.net",
    // With the alertWebhookUrl parameter given.
    SVC_WEBHOOK_URL: "https://alerts.example.org/blastplane",
    SVC_WEBHOOK_SECRET_REF: "kv:notify-webhook-secret",
    // With the terminalHost and terminalCertificateName parameters given (decision 0022).
    JOBAPI_TERMINAL_HOST: "terminal.example.org",
    JOBAPI_TERMINAL_TLS_CERT_URI: "https://kv-abc123.vault.azure.net/certificates/terminal-tls",
  };

  it("B-195: identity-based storage, the identity's client id, no connection string for storage", () => {
    expect(settings.AzureWebJobsStorage__credential).toBe("'managedidentity'");
    expect(settings.AzureWebJobsStorage__clientId).toBe("identityClientId");
    expect(settings.AZURE_CLIENT_ID).toBe("identityClientId");
    expect(Object.keys(settings)).not.toContain("AzureWebJobsStorage");
    expect(functionApp).toMatch(/type: 'UserAssignedIdentity'/);
  });

  it("every setting the Bicep sets is one the app reads (or the platform's), and loadConfig and loadConsoleConfig accept them as deployed", () => {
    const platform = [
      "AZURE_CLIENT_ID",
      "APPLICATIONINSIGHTS_CONNECTION_STRING",
      "APPLICATIONINSIGHTS_AUTHENTICATION_STRING",
    ];
    const known = new Set([
      ...APP_SETTING_NAMES,
      ...CONSOLE_SETTING_NAMES,
      ...NOTIFY_SETTING_NAMES,
      ...CHANNEL_SETTING_NAMES,
      ...platform,
    ]);
    expect(Object.keys(settings).filter((name) => !known.has(name))).toEqual([]);
    expect(Object.keys(settings).sort()).toEqual(Object.keys(filled).sort());
    const config = loadConfig(filled);
    expect(config.storage).toMatchObject({ kind: "identity", blobUrl: "https://stpabc123.blob.core.windows.net" });
    expect(config.keyVaultUrl).toBe("https://kv-abc123.vault.azure.net/");
    expect(() => loadConsoleConfig(filled, path.join(ROOT, "config"))).not.toThrow();
    // Outside the local stack the app starts only with an A2 channel on operational_alert (C-525):
    // the webhook the parameter sets is one; without it, the deployment would not start.
    const notify = loadNotifyConfig(filled, { local: false, catalogDir: path.join(ROOT, "config") });
    expect(notify.webhook).toEqual({ url: filled.SVC_WEBHOOK_URL, secretRef: "kv:notify-webhook-secret" });
    const { SVC_WEBHOOK_URL: _url, SVC_WEBHOOK_SECRET_REF: _ref, ...withoutWebhook } = filled;
    expect(() => loadNotifyConfig(withoutWebhook, { local: false, catalogDir: path.join(ROOT, "config") })).toThrow(
      /operational_alert/,
    );
    expect(source("main.bicep")).toMatch(/param alertWebhookUrl string = ''/);
    expect(functionApp).toMatch(/empty\(alertWebhookUrl\)/);
  });
});

describe("azure.yaml and the postprovision hook", () => {
  it("azure.yaml names the api (Functions, from npm run package) and web (Static Web App) services and the Bicep module", async () => {
    const { parse } = await import("yaml");
    const azure = parse(readFileSync(path.join(ROOT, "azure.yaml"), "utf8"));
    expect(azure.infra).toMatchObject({ provider: "bicep", path: "infra", module: "main" });
    expect(azure.services.api).toMatchObject({ host: "function", language: "js", dist: "dist/package" });
    expect(azure.services.api.hooks.prepackage.run).toBe("npm run package");
    expect(azure.services.web).toMatchObject({ host: "staticwebapp", dist: "dist/web" });
    // The Bicep tags the resources azd deploys to with these service names.
    expect(allBicep).toMatch(/'azd-service-name': 'api'/);
    expect(allBicep).toMatch(/'azd-service-name': 'web'/);
  });

  it("writes a /web-config.json the web app accepts, from the provisioning outputs, and refuses when they are missing", async () => {
    const { webConfigFromOutputs } = await import("../../scripts/write-web-config.mjs");
    const { webConfigSchema } = await import("../../web/src/config.js");
    const config = webConfigFromOutputs({
      AUTH_TENANT_ID: "22222222-2222-2222-2222-222222222222",
      AUTH_CLIENT_ID: "33333333-3333-3333-3333-333333333333",
      API_BASE_URL: "https://func-abc.azurewebsites.net/",
    });
    expect(webConfigSchema.parse(config)).toMatchObject({
      auth: { scopes: ["api://33333333-3333-3333-3333-333333333333/user_impersonation"] },
      api_base_url: "https://func-abc.azurewebsites.net",
    });
    expect(() => webConfigFromOutputs({ AUTH_CLIENT_ID: "x" })).toThrow(/AUTH_TENANT_ID, API_BASE_URL/);
  });
});
