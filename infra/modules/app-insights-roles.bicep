// Monitoring Metrics Publisher on Application Insights: with local auth disabled, only an Entra
// identity may send telemetry.
@description('Name of the Application Insights component.')
param appInsightsName string

@description('Principal (object) id of the user-assigned identity.')
param principalId string

@description('Built-in role definition ids to assign.')
param roleDefinitionIds string[]

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource assignments 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for roleId in roleDefinitionIds: {
    name: guid(appInsights.id, principalId, roleId)
    scope: appInsights
    properties: {
      principalId: principalId
      principalType: 'ServicePrincipal'
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roleId)
    }
  }
]
