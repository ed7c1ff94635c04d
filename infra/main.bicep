// blastplane's control plane in one subscription: `azd up` provisions this, then deploys the Functions
// app (service `api`) and the web app (service `web`). The AKS cluster is NOT created here: the product
// provisions it from the dashboard (blast-control-plane.md §1); this template gives its identity the
// roles to do so (§5, first table). Written for `az bicep build` / `azd provision`; see docs/deploy.md
// for what was compiled and deployed and what was only checked statically.
targetScope = 'subscription'

@minLength(1)
@maxLength(64)
@description('Name of the azd environment; prefixes the resource group and tags every resource (azd-env-name).')
param environmentName string

@minLength(1)
@description('Azure region for every resource (Flex Consumption must be offered there).')
param location string

@description('Entra ID tenant of the app registration that signs researchers in (AUTH_TENANT_ID); empty: the deployment\'s own tenant.')
param authTenantId string = ''

@description('Client id of the API app registration; access tokens carry the audience api://<this id> (AUTH_CLIENT_ID).')
param authClientId string

@description('Grant the identity User Access Administrator on the subscription so it can make the runtime role assignments itself. Best effort per the spec: off by default; when off, the dashboard shows the manual command for each missing assignment.')
param grantRoleAssignmentWrite bool = false

@description('Object id of the person running azd; given Key Vault Secrets Officer on the vault so they can seed secrets. Empty: none.')
param principalId string = ''

@description('Address space of the virtual network that holds the private endpoints and the Function App integration subnet.')
param vnetAddressPrefix string = '10.60.0.0/16'

@description('HTTPS URL that receives operational alerts as Standard Webhooks, signed with the Key Vault secret notify-webhook-secret (a whsec_ value you store). The app refuses to start without an A2-capable alert channel: give this, or set the paging or Slack settings by hand (docs/notifications.md).')
param alertWebhookUrl string = ''

@description('DNS name the browser terminal answers on (wss://<name>/v1/terminal), through an Ingress of the AKS application routing add-on that exposes that path only (decision 0022); point the name at the add-on\'s public IP. Empty: no terminal ingress, the job API stays private.')
param terminalHost string = ''

@description('Name of the certificate in this deployment\'s Key Vault that the terminal\'s ingress serves for terminalHost (required with it); the add-on\'s identity needs Key Vault Certificate User on the vault (docs/deploy.md).')
param terminalCertificateName string = ''

@description('Maximum instances of the Flex Consumption app.')
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int = 40

var abbrs = loadJsonContent('abbreviations.json')
var roles = loadJsonContent('role-assignments.json')
var resourceToken = toLower(uniqueString(subscription().id, environmentName, location))
var tags = { 'azd-env-name': environmentName }
var tenantId = empty(authTenantId) ? tenant().tenantId : authTenantId

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: '${abbrs.resourcesResourceGroups}${environmentName}'
  location: location
  tags: tags
}

module resources 'modules/resources.bicep' = {
  name: 'resources'
  scope: rg
  params: {
    location: location
    tags: tags
    resourceToken: resourceToken
    authTenantId: tenantId
    authClientId: authClientId
    principalId: principalId
    vnetAddressPrefix: vnetAddressPrefix
    maximumInstanceCount: maximumInstanceCount
    alertWebhookUrl: alertWebhookUrl
    terminalHost: terminalHost
    terminalCertificateName: terminalCertificateName
  }
}

// Subscription-scope roles of §5: the identity creates and deletes the cluster and its resources,
// lists resources and fetches cluster credentials. No delegation role is granted.
var subscriptionRoles = filter(
  roles.identityRoles,
  r => r.scope == 'subscription' && (!contains(r, 'optional') || grantRoleAssignmentWrite)
)

resource subscriptionRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for r in subscriptionRoles: {
    name: guid(subscription().id, resources.outputs.identityPrincipalId, roles.roleDefinitionIds[r.role])
    properties: {
      principalId: resources.outputs.identityPrincipalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId(
        'Microsoft.Authorization/roleDefinitions',
        roles.roleDefinitionIds[r.role]
      )
      description: r.purpose
    }
  }
]

@description('Resource group that holds the control plane (the cluster goes into the workspace\'s own group).')
output AZURE_RESOURCE_GROUP string = rg.name

@description('Region of the deployment.')
output AZURE_LOCATION string = location

@description('Client id of the user-assigned identity every cloud call is made with (AZURE_CLIENT_ID of the app).')
output AZURE_MANAGED_IDENTITY_CLIENT_ID string = resources.outputs.identityClientId

@description('Login server of the container registry the job API image is built into.')
output AZURE_CONTAINER_REGISTRY_ENDPOINT string = resources.outputs.registryLoginServer

@description('Name of the Function App (azd service api).')
output AZURE_FUNCTION_APP_NAME string = resources.outputs.functionAppName

@description('HTTPS base URL of the dashboard backend.')
output API_BASE_URL string = resources.outputs.functionAppUrl

@description('HTTPS URL of the dashboard web app (azd service web).')
output WEB_BASE_URL string = resources.outputs.staticWebAppUrl

@description('Key Vault URL (secrets: the job API token).')
output AZURE_KEY_VAULT_ENDPOINT string = resources.outputs.keyVaultUri

@description('Name of the workload storage account (databases, queries, results).')
output AZURE_WORKLOAD_STORAGE_ACCOUNT string = resources.outputs.workloadStorageName

@description('Entra tenant of the app registration (written into the web app\'s /web-config.json).')
output AUTH_TENANT_ID string = tenantId

@description('Client id of the API app registration (written into the web app\'s /web-config.json).')
output AUTH_CLIENT_ID string = authClientId

@description('DNS name of the browser terminal\'s ingress; the post-provision hook writes terminal_url wss://<it>/v1/terminal into the web app\'s /web-config.json. Empty: none.')
output TERMINAL_HOST string = terminalHost
