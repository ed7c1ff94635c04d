// The identity's roles on the vault, and Key Vault Secrets Officer for the person running azd (to seed secrets).
@description('Name of the vault.')
param vaultName string

@description('Principal (object) id of the user-assigned identity.')
param principalId string

@description('Built-in role definition ids to assign to the identity.')
param roleDefinitionIds string[]

@description('Object id of the person running azd; empty: none.')
param operatorPrincipalId string

// Key Vault Secrets Officer (built-in): the operator writes secrets such as channel tokens.
var secretsOfficerRoleId = 'b86a8fe4-44ce-4948-aee5-eccb2c155cd7'

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: vaultName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in roleDefinitionIds: {
    name: guid(vault.id, principalId, roleId)
    scope: vault
    properties: {
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    }
  }
]

resource operatorAssignment 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(operatorPrincipalId)) {
  name: guid(vault.id, operatorPrincipalId, secretsOfficerRoleId)
  scope: vault
  properties: {
    principalId: operatorPrincipalId
    principalType: 'User'
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', secretsOfficerRoleId)
  }
}
