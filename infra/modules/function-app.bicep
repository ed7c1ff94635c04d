// The dashboard backend and console: a Function App on Flex Consumption (FC1), Node 22, running as the
// user-assigned identity. Its package is in the platform account's `app-package` container, read
// with the identity; AzureWebJobsStorage uses the identity-based settings the code reads
// (shared/storage/storage-connection.ts): no connection string, no key.
@description('Azure region.')
param location string

@description('Tags for every resource.')
param tags object

@description('App Service plan name.')
param planName string

@description('Function App name (globally unique host name).')
param appName string

@description('Resource id of the user-assigned identity.')
param identityId string

@description('Client id of the user-assigned identity (AZURE_CLIENT_ID and AzureWebJobsStorage__clientId).')
param identityClientId string

@description('Name of the platform storage account.')
param platformStorageName string

@description('Subnet delegated to the app for VNet integration.')
param subnetId string

@description('Application Insights component name.')
param appInsightsName string

@description('Key Vault URI (KEY_VAULT_URL).')
param keyVaultUri string

@description('Entra tenant of the API app registration (AUTH_TENANT_ID).')
param authTenantId string

@description('Client id of the API app registration (AUTH_CLIENT_ID).')
param authClientId string

@description('Origin of the web app, allowed by CORS.')
param webOrigin string

@description('Maximum instances.')
param maximumInstanceCount int

@description('Subscription the product provisions into and observes (SVC_SUBSCRIPTION_ID).')
param subscriptionId string

@description('HTTPS URL receiving operational alerts as Standard Webhooks, signed with the vault secret notify-webhook-secret; empty: no webhook channel.')
param alertWebhookUrl string

@description('DNS name the browser terminal\'s ingress answers on (JOBAPI_TERMINAL_HOST, decision 0022); empty: no ingress.')
param terminalHost string

@description('Certificate in the Key Vault at keyVaultUri that the terminal\'s ingress serves (JOBAPI_TERMINAL_TLS_CERT_URI, unversioned so rotations follow).')
param terminalCertificateName string

resource platformStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: platformStorageName
}

resource appInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: appInsightsName
}

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: { tier: 'FlexConsumption', name: 'FC1' }
  properties: { reserved: true }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: appName
  location: location
  tags: union(tags, { 'azd-service-name': 'api' })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identityId}': {} }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    virtualNetworkSubnetId: subnetId
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${platformStorage.properties.primaryEndpoints.blob}app-package'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: 2048
      }
      runtime: { name: 'node', version: '22' }
    }
    siteConfig: {
      minTlsVersion: '1.2'
      ftpsState: 'Disabled'
      cors: { allowedOrigins: [webOrigin] }
      appSettings: concat(
        [
        // The host's storage and the product's tables: identity-based (loadConfig refuses keys outside local mode).
        { name: 'AzureWebJobsStorage__accountName', value: platformStorage.name }
        { name: 'AzureWebJobsStorage__credential', value: 'managedidentity' }
        { name: 'AzureWebJobsStorage__clientId', value: identityClientId }
        // DefaultAzureCredential picks the user-assigned identity by this id for every cloud call.
        { name: 'AZURE_CLIENT_ID', value: identityClientId }
        { name: 'TASKHUB_NAME', value: 'blastplane' }
        { name: 'AUTH_TENANT_ID', value: authTenantId }
        { name: 'AUTH_CLIENT_ID', value: authClientId }
        { name: 'KEY_VAULT_URL', value: keyVaultUri }
        { name: 'SVC_SUBSCRIPTION_ID', value: subscriptionId }
        // Telemetry with local auth off: the endpoint string carries no key; the identity authenticates.
        { name: 'APPLICATIONINSIGHTS_CONNECTION_STRING', value: appInsights.properties.ConnectionString }
        { name: 'APPLICATIONINSIGHTS_AUTHENTICATION_STRING', value: 'ClientId=${identityClientId};Authorization=AAD' }
          // Links in notifications (incident email, runbook links) open the console in the web app.
          { name: 'SVC_CONSOLE_BASE_URL', value: webOrigin }
        ],
        // Outside the local stack the app refuses to start without an A2-capable channel on
        // operational_alert (spec operator-console.md §6 item 4): this webhook, or the paging or
        // Slack settings added by hand (docs/notifications.md).
        empty(alertWebhookUrl)
          ? []
          : [
              { name: 'SVC_WEBHOOK_URL', value: alertWebhookUrl }
              { name: 'SVC_WEBHOOK_SECRET_REF', value: 'kv:notify-webhook-secret' }
            ],
        // The browser terminal's ingress (decision 0022): rendered by the job API deploy only with both.
        empty(terminalHost)
          ? []
          : [
              { name: 'JOBAPI_TERMINAL_HOST', value: terminalHost }
              { name: 'JOBAPI_TERMINAL_TLS_CERT_URI', value: '${keyVaultUri}certificates/${terminalCertificateName}' }
            ]
      )
    }
  }
}

@description('Name of the Function App.')
output name string = app.name

@description('HTTPS base URL of the Function App.')
output url string = 'https://${app.properties.defaultHostName}'
