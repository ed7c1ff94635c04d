/**
 * The console's types, apart from the modules that build them: `console-deps.ts` (loaded with the
 * app) hands {@link ConsoleSettings} to `buildConsoleParts` of `console-parts.ts` (its own chunk,
 * loaded on the first console request) and gets {@link ConsoleParts} back. Both import this module;
 * neither imports the other's values, so the wiring runs one way.
 */

import type { createApprovalActivities } from "../../shared/console/approvals/approval-activities.js";
import type { createApprovalService } from "../../shared/console/approvals/approval-service.js";
import type { ApprovalStore } from "../../shared/console/approvals/approval-store.js";
import type { KillSwitch } from "../../shared/ops/kill-switch.js";
import type { ConsoleConfig } from "../../shared/console/console-config.js";
import type { Coordinator } from "../../shared/console/coordinator/coordinator.js";
import type { buildNotifier } from "../../shared/notify/build-notifier.js";
import type { NotifyConfig } from "../../shared/notify/notify-config.js";
import type { BrowserEvidencePolicyCatalog } from "../../shared/console/providers/browser-evidence-policies.js";
import type { HealthMetricSet } from "../../shared/console/providers/health-metrics.js";
import type { ToolRegistry } from "../../shared/console/tools/registry.js";
import type { ActionMode } from "../../shared/ops/actions/action-runner.js";
import type { ActionTypeCatalog } from "../../shared/ops/actions/action-types.js";
import type { createOpsLoop } from "../../shared/ops/ops-loop.js";
import type { RuleCatalog } from "../../shared/ops/rules/rule-catalog.js";
import type { ConfigurationBaseline } from "../../shared/ops/snapshots/configuration-baseline.js";
import type { createSnapshotProducer } from "../../shared/ops/snapshots/snapshot-producer.js";

/** The console's settings and catalogs, loaded and validated at app start; what its parts are built from. */
export interface ConsoleSettings {
  config: ConsoleConfig;
  actionTypes: ActionTypeCatalog;
  ruleCatalog: RuleCatalog;
  /** The representative metrics of `query_subscription_health`. */
  healthMetricSet: HealthMetricSet;
  configurationBaseline: ConfigurationBaseline;
  browserEvidencePolicies: BrowserEvidencePolicyCatalog;
  /** Each action type's mode (catalog default or `SVC_ACTION_MODES`). */
  actionModeOf: (actionType: string) => ActionMode;
  /** The notification channels' settings and routing matrix. */
  notifyConfig: NotifyConfig;
}

/** The console's parts (tools, coordinator, approvals, the operations loop), built once on first use. */
export interface ConsoleParts {
  registry: ToolRegistry;
  coordinator: Coordinator;
  approvals: ReturnType<typeof createApprovalService>;
  /** The durable approval queue the service works over (the channels' `/svc status` counts it). */
  approvalStore: ApprovalStore;
  /** The global kill switch (the channels' `/svc kill-switch status`). */
  killSwitch: KillSwitch;
  /** The notification router over the configured channels (shared/notify, docs/notifications.md). */
  notifier: ReturnType<typeof buildNotifier>;
  approvalActivities: ReturnType<typeof createApprovalActivities>;
  opsLoop: ReturnType<typeof createOpsLoop>;
  /** Records the detection readiness, T2 recovery and configuration baseline snapshots the console's tools read. */
  snapshots: ReturnType<typeof createSnapshotProducer>;
}
