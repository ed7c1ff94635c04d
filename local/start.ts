import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { normalizeObjectId } from "../shared/auth/object-id.js";
import { isLoopbackBind } from "../shared/http/loopback-host.js";
import { createLogger } from "../shared/logging/logger.js";
import { startAzurite } from "./azurite.js";
import { localIssuerTrust } from "./bot-service-issuer.js";
import { checkStackConsistency } from "./consistency-check.js";
import { DashboardJobStore } from "../shared/dashboard/dashboard-jobs.js";
import { createFileDatabaseCatalog, publishDatabase } from "../shared/databases/database-catalog.js";
import { LOCAL_APPROVER_NAMES, localObjectId, startDevIdentityProvider } from "./dev-idp.js";
import { POD_USER } from "../jobapi/executors/kubernetes-manifests.js";
import {
  blastPoolNodes,
  type LocalCluster,
  prepareNodeFolder,
  servingCertificate,
  startLocalCluster,
} from "./kube/cluster.js";
import { azureStandIns } from "./kube/azure-stand-ins.js";
import { removeTree } from "./kube/node-files.js";
import { jobApiServiceAccountName } from "../shared/cluster/job-api-manifests.js";
import { actionSettingsShape } from "../shared/ops/actions/action-settings.js";
import { API_TOKEN_SECRET } from "../shared/secrets/api-tokens.js";
import { LOCAL_ARM_WORLD, startStackArm } from "./arm/stack-arm.js";
import { DurableEngine } from "./durable/engine.js";
import { createHostInvoker } from "./durable/host-invoker.js";
import { createManagementApi } from "./durable/management-api.js";
import { DurableStore } from "./durable/store.js";
import { type DurableClientInputData, LocalFunctionsHost } from "./functions-host.js";
import { loadLocalStackSettings } from "./settings.js";
import { readRunningStack, removeStackFile, writeStackFile } from "./stack-file.js";
import { superviseChildService } from "./supervisor.js";
import { createHealthTransitions, JOB_API_COMPONENT } from "../shared/ops/emitters/health-transitions.js";
import { createEventLog } from "../shared/ops/events.js";
import { TimerScheduler } from "./timer-scheduler.js";
import { startLocalNotifySinks } from "./notify-sinks.js";
import { createWebHandler } from "./web-server.js";
import { createTableTimerStatusStore } from "./timer-status-store.js";

const here = path.dirname(fileURLToPath(import.meta.url));
/** Files 0600, folders 0700 (see main). */
const PRIVATE_UMASK = 0o077;
const DURABLE_BASE_PATH = "/durabletask/";
const DEMO_DATABASE = "16s_rrna_demo";

function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve((server.address() as AddressInfo).port));
  });
}

function close(server: http.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/**
 * `npm start`: the whole product on one machine, driven by the same code that runs on Azure
 * Functions — Azurite, the development identity provider, the durable backend, timers and the
 * Functions host. Ctrl-C or SIGTERM stops everything; children also end if this process is killed.
 */
async function main(): Promise<void> {
  // The Functions bundle is minified: stack traces in the log point into its sources this way.
  process.setSourceMapsEnabled(true);
  const settings = loadLocalStackSettings(process.env, process.cwd());
  const logger = createLogger({ level: settings.logLevel, base: { service: "local-stack" } });
  // Queries, results, the audit log, secrets and Azurite's files are the user's alone: everything
  // this process and its children (Azurite, the job API, BLAST+) create is 0600/0700, and the data
  // folder itself is closed to other users even when an older version left its files readable.
  process.umask(PRIVATE_UMASK);
  mkdirSync(settings.dataDir, { recursive: true, mode: 0o700 });
  chmodSync(settings.dataDir, 0o700);
  const running = readRunningStack(settings.dataDir);
  if (running) {
    throw new Error(
      `a local stack (pid ${running.pid}) is already running on ${settings.dataDir}: ${running.functions_url}`,
    );
  }

  const stops: (() => Promise<void>)[] = [];
  let stopping = false;
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    logger.info("stopping local stack");
    for (const stop of stops.reverse()) {
      await stop().catch((error: unknown) => logger.warn("stop step failed", { error }));
    }
    removeStackFile(settings.dataDir);
    process.exit(code);
  };
  // A failure in background work is logged, never fatal: durable state lives in storage.
  process.on("unhandledRejection", (error) => logger.error("unhandled rejection", { error }));
  process.once("SIGINT", () => void stopAll(0));
  process.once("SIGTERM", () => void stopAll(0));

  // Bound before the job API starts (its terminal admits this origin only); answers 503 until ready.
  let handleWeb: http.RequestListener = (_req, res) => {
    res.writeHead(503, { "content-type": "text/plain; charset=utf-8" }).end("starting");
  };
  const server = http.createServer((req, res) => handleWeb(req, res));
  try {
    const azurite = await startAzurite({
      location: settings.inMemory ? undefined : path.join(settings.dataDir, "azurite"),
      ...settings.azurite,
      logger,
      watchdogPath: path.join(here, "parent-watchdog.cjs"),
    });
    stops.push(() => azurite.stop());

    // The bot's client secret when it is a local `env:` reference (a `kv:` one stays in Key Vault).
    const secretVariable = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(
      process.env.SVC_PLATFORM_A_CLIENT_SECRET_REF ?? "",
    )?.[1];
    const localBotSecret = secretVariable ? process.env[secretVariable] : undefined;
    // The Bot Service–shaped issuer of the Teams bot endpoint serves its key set over HTTPS (as
    // Bot Framework's does) with a certificate of the data folder (docs/channels-teams.md).
    const botServiceTls = servingCertificate(path.join(settings.dataDir, "bot-service"), {
      file: "issuer",
      commonName: "blastplane-local-bot-service",
    });
    const idp = await startDevIdentityProvider({
      port: settings.idpPort,
      keyFile: path.join(settings.dataDir, "idp-signing-key.json"),
      clientId: settings.clientId,
      tenantId: settings.tenantId,
      botService: {
        tls: botServiceTls,
        ...(process.env.SVC_PLATFORM_A_BOT_APP_ID ? { botAppId: process.env.SVC_PLATFORM_A_BOT_APP_ID } : {}),
        // The bot's app token for its replies, unless an Entra is named (SVC_PLATFORM_A_AUTHORITY_HOST).
        ...(localBotSecret && process.env.SVC_PLATFORM_A_TENANT_ID && !process.env.SVC_PLATFORM_A_AUTHORITY_HOST
          ? {
              entra: {
                tenantId: normalizeObjectId(process.env.SVC_PLATFORM_A_TENANT_ID),
                clientSecret: localBotSecret,
              },
            }
          : {}),
      },
    });
    stops.push(() => idp.close());
    if (idp.botService?.authorityHost) {
      process.env.SVC_PLATFORM_A_AUTHORITY_HOST = idp.botService.authorityHost;
      process.env.SVC_PLATFORM_A_AUTHORITY_CA_FILE ||= botServiceTls.certFile;
    }
    // POST /api/messages verifies the local issuer's tokens unless told to trust another key set
    // (a real Azure Bot through a tunnel: SVC_PLATFORM_A_OPENID_METADATA_URL=Bot Framework's), and
    // only while the replies' app token is local too: with a real one (a kv: secret, a real
    // authority) a locally minted activity could name where that token is sent.
    const trust = localIssuerTrust({
      metadataUrl: process.env.SVC_PLATFORM_A_OPENID_METADATA_URL || undefined,
      clientSecretRef: process.env.SVC_PLATFORM_A_CLIENT_SECRET_REF || undefined,
      authorityHost: process.env.SVC_PLATFORM_A_AUTHORITY_HOST || undefined,
    });
    if (trust.action === "refuse") throw new Error(trust.reason);
    if (idp.botService && trust.action === "trust") {
      process.env.SVC_PLATFORM_A_OPENID_METADATA_URL = idp.botService.metadataUrl;
      process.env.SVC_PLATFORM_A_OPENID_CA_FILE ||= botServiceTls.certFile;
    } else if (!process.env.SVC_PLATFORM_A_OPENID_METADATA_URL && process.env.SVC_PLATFORM_A_CLIENT_SECRET_REF) {
      logger.info("the bot's replies use a real app token: POST /api/messages trusts Bot Framework's keys only");
    }

    // The app reads its configuration from app settings, as on Azure.
    Object.assign(process.env, {
      AzureWebJobsStorage: azurite.connectionString,
      TASKHUB_NAME: settings.taskHubName,
      AUTH_TENANT_ID: settings.tenantId,
      AUTH_CLIENT_ID: settings.clientId,
      AUTH_DISCOVERY_URL: idp.discoveryUrl,
      LOG_LEVEL: settings.logLevel,
    });

    // The job API: its own process, as it is its own container on the cluster.
    const jobApiDir = path.join(settings.dataDir, "jobapi");
    const databasesDir = path.join(jobApiDir, "databases");
    if (!settings.skipDemoDatabase && !(await createFileDatabaseCatalog(databasesDir).get(DEMO_DATABASE))) {
      logger.info("adding the demo database", { name: DEMO_DATABASE });
      await publishDatabase(databasesDir, {
        name: DEMO_DATABASE,
        fastaPath: path.resolve(here, "../../local/demo/16s-rrna-demo.fasta"),
        type: "nucl",
        partitions: 2,
      });
    }
    // BLASTPLANE_EXECUTOR=kubernetes: shards run as Jobs on a local Kubernetes-compatible API.
    const kubeEnv: Record<string, string> = {};
    let kubeconfig: string | undefined;
    let localCluster: LocalCluster | undefined;
    // Shard pods run as the image's user (POD_USER), and fill and read the node's database cache.
    // Run as root, the kubelet switches to that user, who cannot enter the 0700 data folder: the
    // nodes' cache is then a folder of its own (filled from storage), removed with the stack.
    let nodeCache = databasesDir;
    if (process.getuid?.() === 0) {
      const dir = mkdtempSync(path.join(os.tmpdir(), "blastplane-node-cache-"));
      nodeCache = prepareNodeFolder(dir, POD_USER);
      // Pods of the user the folder was given to may have left symlinks in it: removed without following them.
      stops.push(async () => void removeTree(dir));
    }
    // A job API deployed from the dashboard is rendered for Azure: the kubelet gives it the stack's
    // Azurite, token store and identity provider in place of Azure's (docs/cluster-deploy.md).
    const standIns = azureStandIns({
      // Its shard and warm-up pods use the nodes' cache, as the stack's own job API's do.
      nodeCacheDir: nodeCache,
      // Only the job API the dashboard deploys (its namespace, its service account) is given them.
      namespaces: [actionSettingsShape.SVC_JOB_API_NAMESPACE.parse(process.env.SVC_JOB_API_NAMESPACE)],
      serviceAccountName: jobApiServiceAccountName(),
      storageConnectionString: azurite.connectionString,
      tokenStoreDir: path.join(jobApiDir, "secrets"),
      secretNames: [API_TOKEN_SECRET],
      identityDiscoveryUrl: idp.discoveryUrl,
      kubeconfig: () => readFileSync(kubeconfig ?? "", "utf8"),
    });
    if (settings.executor === "kubernetes") {
      const namespace = settings.jobApiEnv.JOBAPI_K8S_NAMESPACE ?? "blastplane";
      const cluster = await startLocalCluster({
        logger: logger.child({ component: "local-kube" }),
        dataDir: settings.dataDir,
        port: settings.kube.port,
        nodes: blastPoolNodes(
          settings.kube.nodes,
          settings.kube.nodeMemoryBytes,
          settings.kube.nodeCpu ?? os.availableParallelism(),
        ),
        namespaces: [namespace],
        supplement: standIns,
        // The job API image is this build: its WORKDIR is the project folder (dist/ inside).
        images: [
          {
            pattern: /(^|\/)blastplane-jobapi(:[\w.-]+)?$/,
            workingDir: path.resolve(here, "../.."),
            cmd: ["node", "--enable-source-maps", "dist/jobapi/server.js"],
            files: ["dist/jobapi"],
          },
        ],
      });
      stops.push(() => cluster.stop());
      kubeconfig = cluster.kubeconfigPath;
      localCluster = cluster;
      // The pre-flight measures against a node of the cluster unless told otherwise.
      Object.assign(kubeEnv, {
        KUBECONFIG: kubeconfig,
        JOBAPI_EXECUTOR: "kubernetes",
        JOBAPI_NODE_MEMORY_BYTES: String(settings.kube.nodeMemoryBytes),
        JOBAPI_K8S_DB_CACHE_DIR: nodeCache,
      });
    }
    // The browser terminal's shell needs a Kubernetes API: with the local executor, an empty local
    // cluster (no nodes) so `kubectl get pods -n blastplane` answers (docs/terminal.md).
    if (!kubeconfig) {
      const cluster = await startLocalCluster({
        logger: logger.child({ component: "local-kube" }),
        dataDir: settings.dataDir,
        port: settings.kube.port,
        nodes: [],
        namespaces: [settings.jobApiEnv.JOBAPI_K8S_NAMESPACE ?? "blastplane"],
        images: [],
        supplement: standIns,
      });
      stops.push(() => cluster.stop());
      kubeconfig = cluster.kubeconfigPath;
      localCluster = cluster;
    }
    // The local Resource Manager (docs/cluster.md): workspace choices, provisioning and image builds
    // from the dashboard without Azure. A provisioned cluster's pools are the local Kubernetes API's
    // nodes and its credentials that API's kubeconfig, so the job API deploy targets the same cluster.
    let armUrl: string | undefined;
    if (settings.localArm && localCluster) {
      const stackArm = await startStackArm({
        dataDir: settings.dataDir,
        tenantId: settings.tenantId,
        jwksUrl: idp.jwksUrl,
        cluster: localCluster,
        builtImage: {
          workingDir: path.resolve(here, "../.."),
          cmd: ["node", "--enable-source-maps", "dist/jobapi/server.js"],
          files: ["dist/jobapi"],
        },
        logger: logger.child({ component: "local-arm" }),
      });
      stops.push(() => stackArm.close());
      armUrl = stackArm.arm.url;
      // The app's one identity is the identity provider's managed identity (App Service protocol).
      process.env.IDENTITY_ENDPOINT ||= idp.managedIdentity.endpoint;
      process.env.IDENTITY_HEADER ||= idp.managedIdentity.identityHeader;
      process.env.ARM_ENDPOINT ||= armUrl;
      process.env.ARM_CA_FILE ||= stackArm.caFile;
      process.env.SVC_KUBECONFIG ||= kubeconfig;
      // What the job API deploy renders beyond the workspace (Azure's values come from infra/).
      process.env.JOBAPI_WORKLOAD_IDENTITY_CLIENT_ID ||= idp.managedIdentity.clientId;
      process.env.JOBAPI_APP_SUBNET_CIDR ||= "10.1.0.0/24";
      process.env.JOBAPI_DEPLOY_KEY_VAULT_URL ||= `https://${LOCAL_ARM_WORLD.vault}.vault.azure.net/`;
      process.env.WORKLOAD_IDENTITY_PRINCIPAL_ID ||= idp.managedIdentity.objectId;
      // The image build's context: this project's sources (jobapi/Dockerfile, .dockerignore).
      process.env.IMAGE_BUILD_CONTEXT_DIR ||= path.resolve(here, "../..");
      process.env.IMAGE_BUILD_POLL_SECONDS ||= "2";
    }
    // The terminal daemon (decision 0020): its own process, as it is its own container of the
    // job-API pod; 127.0.0.1 always, its shell with KUBECONFIG for the local cluster. Started beside
    // the job API (not before it): the port is picked here so both can be told it at once.
    const daemonPort = Number(settings.jobApiEnv.JOBAPI_TERMINAL_DAEMON_PORT ?? (await freeLoopbackPort()));
    const terminalDaemonStarting = superviseChildService({
      name: "terminal daemon",
      portVariable: "JOBAPI_TERMINAL_DAEMON_PORT",
      initialBackoffMs: settings.restartBackoffMs,
      script: path.resolve(here, "../jobapi/terminal-daemon.js"),
      env: {
        JOBAPI_TERMINAL_DAEMON_PORT: String(daemonPort),
        KUBECONFIG: kubeconfig,
        LOG_LEVEL: settings.logLevel,
      },
      watchdogPath: path.join(here, "parent-watchdog.cjs"),
      readyMessage: "terminal daemon ready",
      logger,
    });
    // Stopped with the stack even when the job API fails to start meanwhile.
    terminalDaemonStarting.then(
      (daemon) => stops.push(() => daemon.stop()),
      () => undefined,
    );
    // The web app's port is bound now, so the job API knows the only origins that may open the terminal.
    const webPort = await listen(server, settings.port, settings.host);
    stops.push(() => close(server));
    const functionsUrl = `http://${settings.host === "0.0.0.0" ? "127.0.0.1" : settings.host}:${webPort}`;
    const webOrigins = [
      functionsUrl,
      ...(new URL(functionsUrl).hostname === "127.0.0.1" ? [`http://localhost:${webPort}`] : []),
    ];
    // A job API that dies is a `jobapi.unhealthy` event (once per death, shared with the readiness check's watch).
    const jobApiHealth = createHealthTransitions({
      tables: azurite.connectionString,
      events: createEventLog(azurite.connectionString),
      logger,
      source: "local.supervisor",
    });
    // Supervised: if it dies, it comes back on the same port (and the dashboard says not ready meanwhile).
    const jobApi = await superviseChildService({
      onUnexpectedExit: ({ code, signal }) =>
        void jobApiHealth.observe(JOB_API_COMPONENT, {
          healthy: false,
          reason: `the job API process exited (${signal ?? `code ${String(code)}`})`,
        }),
      onRestarted: () => void jobApiHealth.observe(JOB_API_COMPONENT, { healthy: true }),
      name: "job API",
      portVariable: "JOBAPI_PORT",
      initialBackoffMs: settings.restartBackoffMs,
      script: path.resolve(here, "../jobapi/server.js"),
      env: {
        JOBAPI_PORT: String(settings.jobApiPort),
        JOBAPI_HOST: "127.0.0.1",
        JOBAPI_STORAGE_CONNECTION_STRING: azurite.connectionString,
        JOBAPI_DATA_DIR: jobApiDir,
        LOG_LEVEL: settings.logLevel,
        // The browser terminal: tokens of the local identity provider, pages of the local web app.
        JOBAPI_AUTH_CLIENT_ID: settings.clientId,
        JOBAPI_AUTH_DISCOVERY_URL: idp.discoveryUrl,
        JOBAPI_TERMINAL_ALLOWED_ORIGINS: webOrigins.join(","),
        JOBAPI_TERMINAL_DAEMON_PORT: String(daemonPort),
        ...kubeEnv,
        ...settings.jobApiEnv,
      },
      watchdogPath: path.join(here, "parent-watchdog.cjs"),
      readyMessage: "job API ready",
      logger,
    });
    stops.push(() => jobApi.stop());
    await terminalDaemonStarting;
    process.env.JOBAPI_URL = jobApi.url;
    process.env.SECRETS_DIR = path.join(jobApiDir, "secrets");
    process.env.DATABASES_DIR = databasesDir;
    // The console's readiness snapshot observes the local cluster's API and BLAST nodes.
    if (settings.executor === "kubernetes" && kubeconfig) process.env.SVC_KUBECONFIG ||= kubeconfig;
    // Notifications a person can open without a vendor account: mail as .eml files, verified
    // webhook deliveries and the approval inbox under the data folder (docs/notifications.md).
    const sinks = await startLocalNotifySinks({
      dataDir: settings.dataDir,
      secretsDir: process.env.SECRETS_DIR,
      env: process.env,
      logger,
    });
    stops.push(() => sinks.stop());
    Object.assign(process.env, sinks.env);
    // Without approvers an approval filed from the console reaches no one: locally they are the
    // people who sign in as "Local Approver" or "Local Owner" (their inbox folders are by oid).
    // Set but empty means "no approvers" on purpose; only an unset setting gets the local default.
    if (process.env.SVC_CONSOLE_APPROVERS === undefined) {
      process.env.SVC_CONSOLE_APPROVERS = LOCAL_APPROVER_NAMES.map((n) => localObjectId(settings.tenantId, n)).join(
        ",",
      );
      logger.info("approval requests go to the local approvers' inboxes (sign in under one of these names to decide)", {
        approvers: LOCAL_APPROVER_NAMES.join(", "),
      });
    }
    if (!process.env.SVC_CONSOLE_BASE_URL && settings.port !== 0)
      process.env.SVC_CONSOLE_BASE_URL = `http://127.0.0.1:${settings.port}`;

    let clientInput: DurableClientInputData | undefined;
    const host = new LocalFunctionsHost({
      logger,
      routePrefix: "api",
      durableClientInput: () => {
        if (!clientInput) throw new Error("durable backend not ready");
        return clientInput;
      },
    });
    await host.load(settings.functionsEntry ?? path.resolve(here, "../functions/index.js"));

    const store = DurableStore.fromConnectionString(azurite.connectionString, settings.taskHubName);
    const engine = new DurableEngine({
      store,
      invoker: createHostInvoker(host),
      logger: logger.child({ component: "durable" }),
      activityConcurrency: settings.activityConcurrency,
    });
    // Loopback only, and keyed like the Functions host's system key: a new key per start.
    const durableKey = randomBytes(24).toString("base64url");
    const rpcServer = http.createServer(createManagementApi(engine, logger, DURABLE_BASE_PATH, { key: durableKey }));
    const rpcPort = await listen(rpcServer, 0, "127.0.0.1");
    stops.push(() => close(rpcServer));
    const rpcBaseUrl = `http://127.0.0.1:${rpcPort}${DURABLE_BASE_PATH}${durableKey}/`;
    const mgmt = `${rpcBaseUrl}instances/INSTANCEID`;
    clientInput = {
      taskHubName: settings.taskHubName,
      creationUrls: {
        createNewInstancePostUri: `${rpcBaseUrl}orchestrators/{functionName}[/{instanceId}]`,
        createAndWaitOnNewInstancePostUri: `${rpcBaseUrl}orchestrators/{functionName}[/{instanceId}]`,
      },
      managementUrls: {
        id: "INSTANCEID",
        statusQueryGetUri: mgmt,
        sendEventPostUri: `${mgmt}/raiseEvent/{eventName}`,
        terminatePostUri: `${mgmt}/terminate?reason={text}`,
        rewindPostUri: `${mgmt}/rewind?reason={text}`,
        purgeHistoryDeleteUri: mgmt,
        suspendPostUri: `${mgmt}/suspend?reason={text}`,
        resumePostUri: `${mgmt}/resume?reason={text}`,
      },
      baseUrl: rpcBaseUrl,
      requiredQueryStringParameters: `code=${durableKey}`,
      rpcBaseUrl,
    };
    // Before resuming work: repair or fail what a crash left half-written (issue 15).
    await checkStackConsistency({
      store,
      dashboardJobs: DashboardJobStore.fromConnectionString(azurite.connectionString),
      logger,
    });
    await engine.start();
    stops.push(() => engine.stop());

    const timers = new TimerScheduler({
      invoker: { invoke: (fn, data) => host.invoke(fn, data) },
      store: await createTableTimerStatusStore(azurite.connectionString, settings.taskHubName),
      logger,
      env: process.env,
    });
    await timers.start(host.functionsByTrigger("timerTrigger"));
    stops.push(() => timers.stop());
    stops.push(() => host.stop());

    // The dashboard web app shares the Functions origin (no CORS for /api), as on Static Web Apps.
    const idpUrl = new URL(idp.url);
    const terminalUrl = `${jobApi.url.replace(/^http/, "ws")}/v1/terminal`;
    handleWeb = createWebHandler({
      root: path.resolve(here, "../web"),
      api: host.handleHttp,
      connectOrigins: () => [idp.url, new URL(terminalUrl).origin],
      loopbackHostOnly: isLoopbackBind(settings.host),
      webConfig: () => ({
        auth: {
          client_id: settings.clientId,
          // MSAL requires an https authority; it only names MSAL's cache here, because the
          // provider's endpoints come inline (authority_metadata) and MSAL fetches nothing else.
          authority: `https://${idpUrl.host}/${settings.tenantId}/v2.0`,
          known_authorities: [idpUrl.host],
          protocol_mode: "OIDC",
          authority_metadata: idp.metadata(),
          scopes: [`${idp.audience}/user_impersonation`],
        },
        api_base_url: "",
        terminal_url: terminalUrl,
      }),
    });
    const port = webPort;
    // The app's redirect URI, under both loopback names a browser may use.
    idp.allowRedirectUri(`${functionsUrl}/`);
    if (new URL(functionsUrl).hostname === "127.0.0.1") idp.allowRedirectUri(`http://localhost:${port}/`);

    writeStackFile(settings.dataDir, {
      pid: process.pid,
      started_at: new Date().toISOString(),
      functions_url: functionsUrl,
      idp_url: idp.url,
      jobapi_url: jobApi.url,
      jobapi_data_dir: jobApiDir,
      durable_rpc_url: rpcBaseUrl,
      blob_endpoint: azurite.blobEndpoint,
      table_endpoint: azurite.tableEndpoint,
      ...(kubeconfig ? { kubeconfig } : {}),
      ...(armUrl ? { arm_url: armUrl } : {}),
      ...(idp.botService ? { bot_service_url: new URL(idp.botService.metadataUrl).origin } : {}),
    });
    logger.info("local stack ready", {
      functions_url: functionsUrl,
      idp_url: idp.url,
      data_dir: settings.dataDir,
      node: process.version,
    });
    process.stdout.write(
      [
        "",
        "blastplane local stack is running",
        `  Dashboard (web app)        ${functionsUrl}/`,
        `  Functions (dashboard API)  ${functionsUrl}/api/health`,
        `  Job API                    ${jobApi.url}/docs`,
        `  Identity provider          ${idp.discoveryUrl}`,
        ...(idp.botService ? [`  Bot Service issuer (Teams) ${idp.botService.metadataUrl}`] : []),
        ...(armUrl ? [`  Resource Manager (local)   ${armUrl} (subscription ${LOCAL_ARM_WORLD.subscriptionId})`] : []),
        `  Data folder                ${settings.inMemory ? "(in memory)" : settings.dataDir}`,
        ...(kubeconfig
          ? [
              `  Local Kubernetes API       kubectl --kubeconfig ${kubeconfig} get jobs,pods -n ${settings.jobApiEnv.JOBAPI_K8S_NAMESPACE ?? "blastplane"}`,
            ]
          : []),
        "",
        `  Notifications              ${sinks.mailDir} (.eml), ${sinks.inboxDir}, ${sinks.webhookDir}`,
        "",
        "  Get a token:   npx blastplane token --role Contributor",
        `  Try it:        curl -H "Authorization: Bearer $(npx blastplane token --role Reader)" ${functionsUrl}/api/me`,
        "  Job API token: npx blastplane api-token",
        '  Addresses:     eval "$(npx blastplane env)"   (sets DASHBOARD, JOBAPI, KUBECONFIG for curl and kubectl)',
        "  Deliveries:    npx blastplane notifications   (send one: npx blastplane notify test)",
        "  Stop:          Ctrl-C",
        "",
      ].join("\n"),
    );
  } catch (error) {
    logger.error("local stack failed to start", { error });
    const busy = portInUse(error, {
      PORT: settings.port,
      IDP_PORT: settings.idpPort,
      JOBAPI_PORT: settings.jobApiPort,
    });
    if (busy) process.stderr.write(`\n${busy}\n\n`);
    await stopAll(1);
  }
}

/** A free port on 127.0.0.1 (bound, read, released) for a child that is told its port up front. */
async function freeLoopbackPort(): Promise<number> {
  const probe = http.createServer();
  const port = await listen(probe, 0, "127.0.0.1");
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/** A plain-words hint when a listener's port is taken (another stack, or another program). */
function portInUse(error: unknown, ports: Record<string, number>): string | undefined {
  const text =
    error instanceof Error ? `${error.message} ${String((error as { cause?: unknown }).cause ?? "")}` : String(error);
  const match = /EADDRINUSE[^\d]*(?:[\d.:[\]a-f]*:)?(\d+)/.exec(text);
  if (!match) return undefined;
  const port = Number(match[1]);
  const setting = Object.entries(ports).find(([, value]) => value === port)?.[0];
  return (
    `Port ${port} is already in use (another blastplane stack, or another program). ` +
    `Stop that process, or start on other ports, e.g. ${setting ?? "PORT"}=${port + 100} npm start (0 picks a free port).`
  );
}

void main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
