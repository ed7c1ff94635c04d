// Key Vault in RBAC mode with purge protection, reached over a private endpoint only.
@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object

@description('Vault name (3-24 characters).')
@minLength(3)
@maxLength(24)
param name string

@description('Subnet for the private endpoint.')
param privateEndpointSubnetId string

@description('Private DNS zone id of privatelink.vaultcore.azure.net.')
param privateDnsZoneId string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: tenant().tenantId
    sku: { family: 'A', name: 'standard' }
    enableRbacAuthorization: true
    enablePurgeProtection: true
    enableSoftDelete: true
    softDeleteRetentionInDays: 90
    publicNetworkAccess: 'Disabled'
    networkAcls: { defaultAction: 'Deny', bypass: 'None' }
  }
}

resource endpoint 'Microsoft.Network/privateEndpoints@2024-01-01' = {
  name: 'pe-${name}-vault'
  location: location
  tags: tags
  properties: {
    subnet: { id: privateEndpointSubnetId }
    privateLinkServiceConnections: [
      {
        name: '${name}-vault'
        properties: { privateLinkServiceId: vault.id, groupIds: ['vault'] }
      }
    ]
  }
}

resource endpointDns 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-01-01' = {
  parent: endpoint
  name: 'default'
  properties: {
    privateDnsZoneConfigs: [{ name: 'vault', properties: { privateDnsZoneId: privateDnsZoneId } }]
  }
}

@description('Name of the vault.')
output name string = vault.name

@description('Vault URI (KEY_VAULT_URL).')
output uri string = vault.properties.vaultUri
