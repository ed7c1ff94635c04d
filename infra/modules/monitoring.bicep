// Log Analytics and Application Insights with local (key) authentication disabled: telemetry is
// accepted only from an Entra identity (the app's, with Monitoring Metrics Publisher).
@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object

@description('Log Analytics workspace name.')
param logAnalyticsName string

@description('Application Insights component name.')
param appInsightsName string

resource workspace 'Microsoft.OperationalInsights/workspaces@2023-09-01' = {
  name: logAnalyticsName
  location: location
  tags: tags
  properties: {
    sku: { name: 'PerGB2018' }
    retentionInDays: 30
    features: { disableLocalAuth: true }
  }
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' = {
  name: appInsightsName
  location: location
  tags: tags
  kind: 'web'
  properties: {
    Application_Type: 'web'
    WorkspaceResourceId: workspace.id
    DisableLocalAuth: true
  }
}

@description('Name of the Application Insights component.')
output appInsightsName string = appInsights.name

@description('Resource id of the Log Analytics workspace (SVC_LOG_ANALYTICS_WORKSPACE_ID takes its customer id).')
output logAnalyticsCustomerId string = workspace.properties.customerId
