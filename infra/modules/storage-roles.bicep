// Data-plane roles of the identity on one storage account, each a guid()-named assignment.
@description('Name of the storage account.')
param storageName string

@description('Principal (object) id of the user-assigned identity.')
param principalId string

@description('Built-in role definition ids to assign.')
param roleDefinitionIds string[]

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in roleDefinitionIds: {
    name: guid(account.id, principalId, roleId)
    scope: account
    properties: {
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    }
  }
]
