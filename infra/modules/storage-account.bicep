// A storage account reached only with Entra tokens over private endpoints: shared keys off (no
// account key, no SAS can be used), public network access disabled, TLS 1.2, no anonymous blobs.
@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object

@description('Globally unique account name (3-24 lowercase letters or digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Blob containers to create.')
param containers string[]

@description('Subnet for the private endpoints.')
param privateEndpointSubnetId string

@description('Private DNS zone ids by service (blob, queue, table).')
param privateDnsZoneIds object

@description('Services that get a private endpoint (blob, queue, table).')
param services string[]

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: { name: 'Standard_LRS' }
  properties: {
    allowSharedKeyAccess: false
    publicNetworkAccess: 'Disabled'
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    networkAcls: {
      defaultAction: 'Deny'
      bypass: 'None'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource blobContainers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [
  for container in containers: {
    parent: blobService
    name: container
    properties: { publicAccess: 'None' }
  }
]

resource endpoints 'Microsoft.Network/privateEndpoints@2024-01-01' = [
  for service in services: {
    name: 'pe-${name}-${service}'
    location: location
    tags: tags
    properties: {
      subnet: { id: privateEndpointSubnetId }
      privateLinkServiceConnections: [
        {
          name: '${name}-${service}'
          properties: {
            privateLinkServiceId: account.id
            groupIds: [service]
          }
        }
      ]
    }
  }
]

resource endpointDns 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-01-01' = [
  for (service, i) in services: {
    parent: endpoints[i]
    name: 'default'
    properties: {
      privateDnsZoneConfigs: [
        {
          name: service
          properties: { privateDnsZoneId: privateDnsZoneIds[service] }
        }
      ]
    }
  }
]

@description('Name of the storage account.')
output name string = account.name

@description('Blob endpoint of the account.')
output blobEndpoint string = account.properties.primaryEndpoints.blob
