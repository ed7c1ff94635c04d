// The virtual network: private endpoints, the Function App's outbound integration (Flex Consumption
// delegates its subnet to Microsoft.App/environments), and a subnet the product provisions the AKS
// cluster into. Private DNS zones resolve the storage and vault names to their private endpoints.
@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object

@description('Name of the virtual network.')
param name string

@description('Address space (a /16 is split into /24 subnets and a /20 for the cluster).')
param addressPrefix string

var storageServices = ['blob', 'queue', 'table']

resource vnet 'Microsoft.Network/virtualNetworks@2024-01-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    addressSpace: { addressPrefixes: [addressPrefix] }
    subnets: [
      {
        name: 'private-endpoints'
        properties: {
          addressPrefix: cidrSubnet(addressPrefix, 24, 0)
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
      {
        name: 'app'
        properties: {
          addressPrefix: cidrSubnet(addressPrefix, 24, 1)
          delegations: [
            {
              name: 'flex-consumption'
              properties: { serviceName: 'Microsoft.App/environments' }
            }
          ]
        }
      }
      {
        name: 'aks'
        properties: {
          addressPrefix: cidrSubnet(addressPrefix, 20, 1)
        }
      }
    ]
  }
}

resource storageZones 'Microsoft.Network/privateDnsZones@2020-06-01' = [
  for service in storageServices: {
    name: 'privatelink.${service}.${environment().suffixes.storage}'
    location: 'global'
    tags: tags
  }
]

resource storageZoneLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2020-06-01' = [
  for (service, i) in storageServices: {
    parent: storageZones[i]
    name: '${name}-link'
    location: 'global'
    properties: {
      registrationEnabled: false
      virtualNetwork: { id: vnet.id }
    }
  }
]

resource vaultZone 'Microsoft.Network/privateDnsZones@2020-06-01' = {
  name: 'privatelink.vaultcore.azure.net'
  location: 'global'
  tags: tags
}

resource vaultZoneLink 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2020-06-01' = {
  parent: vaultZone
  name: '${name}-link'
  location: 'global'
  properties: {
    registrationEnabled: false
    virtualNetwork: { id: vnet.id }
  }
}

@description('Subnet of the private endpoints.')
output privateEndpointSubnetId string = vnet.properties.subnets[0].id

@description('Subnet delegated to the Function App (VNet integration).')
output appSubnetId string = vnet.properties.subnets[1].id

@description('Subnet for the AKS cluster the product provisions.')
output aksSubnetId string = vnet.properties.subnets[2].id

@description('Private DNS zone ids by storage service (blob, queue, table).')
output storageDnsZoneIds object = {
  blob: storageZones[0].id
  queue: storageZones[1].id
  table: storageZones[2].id
}

@description('Private DNS zone id of Key Vault.')
output vaultDnsZoneId string = vaultZone.id
