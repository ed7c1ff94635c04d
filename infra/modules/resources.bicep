// Everything of the control plane inside its resource group. Storage, Key Vault and the Function App's
// traffic stay on the virtual network (private endpoints, VNet integration); nothing uses a shared key,
// a SAS or a connection string: every call is made by the one user-assigned identity.
@description('Azure region for every resource.')
param location string

@description('Tags for every resource (azd-env-name).')
param tags object

@description('Short unique suffix for globally unique names.')
param resourceToken string

@description('Entra tenant of the API app registration (AUTH_TENANT_ID).')
param authTenantId string

@description('Client id of the API app registration (AUTH_CLIENT_ID).')
param authClientId string

@description('Object id of the person running azd (Key Vault Secrets Officer); empty: none.')
param principalId string

@description('Address space of the virtual network.')
param vnetAddressPrefix string

@description('Maximum instances of the Flex Consumption app.')
param maximumInstanceCount int

@description('HTTPS URL receiving operational alerts (Standard Webhooks); empty: none.')
param alertWebhookUrl string

@description('DNS name of the browser terminal\'s ingress (decision 0022); empty: none.')
param terminalHost string

@description('Key Vault certificate the terminal\'s ingress serves; required with terminalHost.')
param terminalCertificateName string

var abbrs = loadJsonContent('../abbreviations.json')
var roles = loadJsonContent('../role-assignments.json')

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: '${abbrs.managedIdentityUserAssignedIdentities}${resourceToken}'
  location: location
  tags: tags
}

module network 'network.bicep' = {
  name: 'network'
  params: {
    location: location
    tags: tags
    name: '${abbrs.networkVirtualNetworks}${resourceToken}'
    addressPrefix: vnetAddressPrefix
  }
}

// Platform storage: the Functions host (task hub queues and tables, deployment package) and the
// product's own tables and blobs (jobs, operations, audit, evidence).
module platformStorage 'storage-account.bicep' = {
  name: 'platform-storage'
  params: {
    location: location
    tags: tags
    name: '${abbrs.storageStorageAccounts}p${resourceToken}'
    containers: ['app-package', 'evidence']
    privateEndpointSubnetId: network.outputs.privateEndpointSubnetId
    privateDnsZoneIds: network.outputs.storageDnsZoneIds
    services: ['blob', 'queue', 'table']
  }
}

// Workload storage: databases, query batches and results, read by the cluster's pods.
module workloadStorage 'storage-account.bicep' = {
  name: 'workload-storage'
  params: {
    location: location
    tags: tags
    name: '${abbrs.storageStorageAccounts}w${resourceToken}'
    containers: []
    privateEndpointSubnetId: network.outputs.privateEndpointSubnetId
    privateDnsZoneIds: network.outputs.storageDnsZoneIds
    services: ['blob', 'table']
  }
}

module keyVault 'key-vault.bicep' = {
  name: 'key-vault'
  params: {
    location: location
    tags: tags
    name: '${abbrs.keyVaultVaults}${resourceToken}'
    privateEndpointSubnetId: network.outputs.privateEndpointSubnetId
    privateDnsZoneId: network.outputs.vaultDnsZoneId
  }
}

resource registry 'Microsoft.ContainerRegistry/registries@2023-07-01' = {
  name: '${abbrs.containerRegistryRegistries}${resourceToken}'
  location: location
  tags: tags
  sku: { name: 'Standard' }
  properties: {
    // Pulls and pushes use Entra tokens (AcrPull / AcrPush); no registry password exists.
    adminUserEnabled: false
    anonymousPullEnabled: false
  }
}

module monitoring 'monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    logAnalyticsName: '${abbrs.operationalInsightsWorkspaces}${resourceToken}'
    appInsightsName: '${abbrs.insightsComponents}${resourceToken}'
  }
}

resource staticWebApp 'Microsoft.Web/staticSites@2023-12-01' = {
  name: '${abbrs.webStaticSites}${resourceToken}'
  location: location
  tags: union(tags, { 'azd-service-name': 'web' })
  sku: { name: 'Standard', tier: 'Standard' }
  properties: {}
}

module functionApp 'function-app.bicep' = {
  name: 'function-app'
  params: {
    location: location
    tags: tags
    planName: '${abbrs.webServerFarms}${resourceToken}'
    appName: '${abbrs.webSitesFunctions}${resourceToken}'
    identityId: identity.id
    identityClientId: identity.properties.clientId
    platformStorageName: platformStorage.outputs.name
    subnetId: network.outputs.appSubnetId
    appInsightsName: monitoring.outputs.appInsightsName
    keyVaultUri: keyVault.outputs.uri
    authTenantId: authTenantId
    authClientId: authClientId
    webOrigin: 'https://${staticWebApp.properties.defaultHostname}'
    maximumInstanceCount: maximumInstanceCount
    subscriptionId: subscription().subscriptionId
    alertWebhookUrl: alertWebhookUrl
    terminalHost: terminalHost
    terminalCertificateName: terminalCertificateName
  }
}

// Resource-scope roles of blast-control-plane.md §5 (first table) and the host's own two.
var allRoles = concat(roles.identityRoles, roles.hostRoles)

module platformStorageRoles 'storage-roles.bicep' = {
  name: 'platform-storage-roles'
  params: {
    storageName: platformStorage.outputs.name
    principalId: identity.properties.principalId
    roleDefinitionIds: map(filter(allRoles, r => r.scope == 'platformStorage'), r => roles.roleDefinitionIds[r.role])
  }
}

module workloadStorageRoles 'storage-roles.bicep' = {
  name: 'workload-storage-roles'
  params: {
    storageName: workloadStorage.outputs.name
    principalId: identity.properties.principalId
    roleDefinitionIds: map(filter(allRoles, r => r.scope == 'workloadStorage'), r => roles.roleDefinitionIds[r.role])
  }
}

module keyVaultRoles 'key-vault-roles.bicep' = {
  name: 'key-vault-roles'
  params: {
    vaultName: keyVault.outputs.name
    principalId: identity.properties.principalId
    roleDefinitionIds: map(filter(allRoles, r => r.scope == 'platformKeyVault'), r => roles.roleDefinitionIds[r.role])
    operatorPrincipalId: principalId
  }
}

var registryRoleIds = map(filter(allRoles, r => r.scope == 'registry'), r => roles.roleDefinitionIds[r.role])

resource registryRoleAssignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in registryRoleIds: {
    name: guid(registry.id, identity.id, roleId)
    scope: registry
    properties: {
      principalId: identity.properties.principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    }
  }
]

module monitoringRoles 'app-insights-roles.bicep' = {
  name: 'monitoring-roles'
  params: {
    appInsightsName: monitoring.outputs.appInsightsName
    principalId: identity.properties.principalId
    roleDefinitionIds: map(filter(allRoles, r => r.scope == 'monitoring'), r => roles.roleDefinitionIds[r.role])
  }
}

@description('Principal (object) id of the user-assigned identity.')
output identityPrincipalId string = identity.properties.principalId

@description('Client id of the user-assigned identity.')
output identityClientId string = identity.properties.clientId

@description('Login server of the container registry.')
output registryLoginServer string = registry.properties.loginServer

@description('Name of the Function App.')
output functionAppName string = functionApp.outputs.name

@description('HTTPS base URL of the Function App.')
output functionAppUrl string = functionApp.outputs.url

@description('HTTPS URL of the Static Web App.')
output staticWebAppUrl string = 'https://${staticWebApp.properties.defaultHostname}'

@description('Key Vault URI.')
output keyVaultUri string = keyVault.outputs.uri

@description('Name of the workload storage account.')
output workloadStorageName string = workloadStorage.outputs.name

@description('Subnet the product provisions the AKS cluster into (it reaches the private endpoints from there).')
output aksSubnetId string = network.outputs.aksSubnetId
