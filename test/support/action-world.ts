import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ContainerClient } from "@azure/storage-blob";
import { afterAll, beforeAll } from "vitest";
import { createDashboardJobService, type DashboardJobService } from "../../shared/dashboard/dashboard-job-service.js";
import { type DashboardJob, DashboardJobStore } from "../../shared/dashboard/dashboard-jobs.js";
import { createFileDatabaseCatalog, publishDatabase } from "../../shared/databases/database-catalog.js";
import { createDatabaseService, type DatabaseService } from "../../shared/databases/database-service.js";
import { DatabaseStateStore } from "../../shared/databases/database-state.js";
import { createActionExecutors } from "../../functions/composition/action-executors.js";
import { actionModes } from "../../shared/ops/actions/action-settings.js";
import { createActionOutcomeStore } from "../../shared/ops/actions/action-outcomes.js";
import type { ActionMode } from "../../shared/ops/actions/action-runner.js";
import type { JobApiDeployment } from "../../shared/ops/actions/job-api-deployment-actions.js";
import type { AksAgentPools, NodePoolBounds } from "../../shared/ops/actions/node-pool-actions.js";
import { createAuditLog } from "../../shared/ops/audit.js";
import { createEventLog } from "../../shared/ops/events.js";
import { createKillSwitch } from "../../shared/ops/kill-switch.js";
import type { ControlPlaneStateReader, ProposedAction } from "../../shared/ops/verifier/verifier.js";
import { type ApiTokenSettings, createApiTokenSettings } from "../../shared/secrets/api-token-settings.js";
import { ApiTokenService, createFileSecretStore } from "../../shared/secrets/api-tokens.js";
import { actions, consoleHarness } from "./console-harness.js";
import { demoQueries } from "./jobapi-client.js";
import { captureLogger, fakeJobApi, fakeOrchestrations, prefixedTables } from "./service-fakes.js";

export const QUERY = ">q1 a query\nACGTACGTACGTACGTACGTACGTACGTAC\n";
export const APPROVER = { oid: "oid-abe", name: "Abe" };
export const REQUESTER = { oid: "oid-olga", name: "Olga" };
export const BOUNDS: NodePoolBounds = { blast: { min: 1, max: 5 } };

/**
 * A folder for one test file (removed after it) holding one published BLAST database, `actdemo`
 * (real makeblastdb over demo sequences).
 */
export function actionTestFolder(): { dir: () => string; databasesDir: () => string } {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "bp-actions-"));
    const fasta = path.join(dir, "db.fa");
    writeFileSync(fasta, demoQueries(5, 300));
    await publishDatabase(path.join(dir, "databases"), {
      name: "actdemo",
      fastaPath: fasta,
      type: "nucl",
      partitions: 0,
    });
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const root = () => {
    if (!dir) throw new Error("the action test folder is not made yet");
    return dir;
  };
  return { dir: root, databasesDir: () => path.join(root(), "databases") };
}

/** The context of an execution the test replays or runs directly under `idempotencyKey`. */
export const replayContext = (idempotencyKey: string) => ({ idempotencyKey, actor: APPROVER, requestId: "req-replay" });

/** Every action type in enforce mode (the catalog's defaults are shadow). */
export const ENFORCE_ALL: Record<string, ActionMode> = Object.fromEntries(
  actions.action_types.map((a) => [a.id, "enforce"]),
);

export interface ActionWorldOptions {
  modes?: Record<string, ActionMode>;
  deployment?: JobApiDeployment;
  agentPools?: AksAgentPools;
  /** Wraps the services the executors call (a test makes one fail after acting, as a crashed host would). */
  wrapJobs?: (service: DashboardJobService) => DashboardJobService;
  wrapDatabases?: (service: DatabaseService) => DatabaseService;
  wrapTokens?: (settings: ApiTokenSettings) => ApiTokenSettings;
  /** False: the token store holds no token (as before the first start). */
  tokenConfigured?: boolean;
  /** The executors' clock (a test moves it past a lease). */
  now?: () => Date;
}

/**
 * The executors over the control plane's real stores on Azurite (dashboard jobs and their queries,
 * database state, audit, approvals, outcomes), a real published BLAST database folder, a file
 * token store, and the in-memory task hub behind the durable client port.
 */
export async function actionWorld(connectionString: string, databasesDir: string, options: ActionWorldOptions = {}) {
  const prefix = `act${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const tables = prefixedTables(connectionString, prefix);
  const jobs = new DashboardJobStore(
    tables("dashboardjobs"),
    new ContainerClient(connectionString, `${prefix}-queries`),
  );
  const audit = createAuditLog(tables);
  const events = createEventLog(tables);
  const hub = fakeOrchestrations();
  const logger = captureLogger();
  const jobService = createDashboardJobService({
    jobs,
    orchestrations: hub.client,
    jobApi: fakeJobApi(),
    audit,
    logger,
    pollIntervalSeconds: 5,
  });
  const states = new DatabaseStateStore(tables("databasestate"));
  const catalog = createFileDatabaseCatalog(databasesDir);
  const databaseService = createDatabaseService({
    catalog,
    states,
    orchestrations: hub.client,
    audit,
    logger,
    sourceConfigured: true,
    partitions: 0,
  });
  const tokens = new ApiTokenService(createFileSecretStore(mkdtempSync(path.join(tmpdir(), "bp-act-secrets-"))), {
    cacheMs: 0,
  });
  if (options.tokenConfigured !== false) await tokens.ensure();
  const tokenSettings = createApiTokenSettings({ tokens, audit, events, logger, graceSeconds: 3600 });
  const killSwitch = createKillSwitch(tables);
  const reader: ControlPlaneStateReader = {
    jobStatus: async (id) => (await jobs.get(id))?.status ?? null,
    database: async (name) =>
      (await catalog.get(name)) ? { update_available: (await states.get(name)).update_available } : null,
    apiTokenConfigured: async () => (await tokens.state()) !== undefined,
    clusterReachable: async () => true,
    nodePoolBounds: async (pool) => BOUNDS[pool],
    killSwitchOn: () => killSwitch.isOn(),
  };
  const outcomes = createActionOutcomeStore(tables);
  const executor = createActionExecutors({
    outcomes,
    audit,
    mode: actionModes(actions, options.modes ?? ENFORCE_ALL),
    killSwitch,
    jobs: { jobs, service: () => options.wrapJobs?.(jobService) ?? jobService },
    databases: {
      catalog,
      states,
      orchestrations: () => hub.client,
      service: () => options.wrapDatabases?.(databaseService) ?? databaseService,
    },
    tokens: { tokens, settings: () => options.wrapTokens?.(tokenSettings) ?? tokenSettings },
    jobApiDeployment: options.deployment,
    agentPools: options.agentPools,
    nodePoolBounds: BOUNDS,
    now: options.now,
  });
  // The console (approvals, tools, coordinator) over these stores and this executor.
  const { approvals, coordinator, verify } = consoleHarness(tables, {
    approvers: [APPROVER.oid],
    ttlSeconds: 3600,
    reminderOffsetsSeconds: [],
    controlPlane: { reader, executor },
  });

  /** Files `action` for approval and approves it, as an approver's `approve_hil` does; answers the item after execution. */
  async function approve(action: ProposedAction) {
    const filed = await approvals.request({
      action,
      requester: REQUESTER,
      reason: "verifier_abstained",
      severity: "medium",
      idempotencyKey: randomUUID(),
      requestId: "req-file",
      now: new Date(),
    });
    const decided = await approvals.decide({
      approvalId: filed.approval_id,
      actor: APPROVER,
      decision: "approve",
      justification: "checked",
      requestId: "req-approve",
      now: new Date(),
    });
    return decided.item;
  }

  /** A dashboard job submitted through the real submit path, then moved to `status`. */
  async function jobIn(status: string, overrides: { title?: string } = {}): Promise<DashboardJob> {
    const { job } = await jobService.submit(
      { oid: "oid-cora", name: "Cora", tenant_id: "tenant", roles: ["Contributor"] },
      {
        program: "blastn",
        db: "actdemo",
        query_fasta: QUERY,
        options: { evalue: 0.001 },
        execution_profile: "standard",
        priority: 3,
        idempotency_key: randomUUID(),
        title: overrides.title ?? "the original",
      },
    );
    return (await jobs.update(job.job_id, (j) => ({ ...j, status }))) ?? job;
  }

  /** This execution's audit entries (`ops.action_executed`). */
  const executions = async () => (await audit.list({ action: "ops.action_executed", limit: 1000 })).reverse();

  return {
    coordinator,
    tables,
    jobs,
    audit,
    hub,
    jobService,
    states,
    catalog,
    databaseService,
    tokens,
    tokenSettings,
    killSwitch,
    verify,
    outcomes,
    executor,
    approvals,
    approve,
    jobIn,
    executions,
  };
}
