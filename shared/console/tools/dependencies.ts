import type { ActionExecutor } from "../../ops/actions/action-executor.js";
import type { ActionTypeCatalog } from "../../ops/actions/action-types.js";
import type { AuditLog } from "../../ops/audit.js";
import type { EventLog } from "../../ops/events.js";
import type { EvidenceStore } from "../../ops/evidence-store.js";
import type { RuleCatalog } from "../../ops/rules/rule-catalog.js";
import type { ProposedAction, VerifierReport } from "../../ops/verifier/verifier.js";
import type { ApprovalService } from "../approvals/approval-service.js";
import type { ApprovalStore } from "../approvals/approval-store.js";
import type { BreakGlassConfig } from "../break-glass/break-glass.js";
import type { Notifier } from "../../notify/types.js";
import type { ConsoleProviders } from "../providers/providers.js";
import type { UsageLedger } from "../usage/usage-ledger.js";
import type { ToolRegistry } from "./registry.js";

/** Everything the console's tools read or act through; built once by the composition root. */
export interface ConsoleToolDependencies {
  events: EventLog;
  audit: AuditLog;
  rules: RuleCatalog;
  actions: ActionTypeCatalog;
  verify(action: ProposedAction): Promise<VerifierReport>;
  approvals: ApprovalService;
  approvalStore: ApprovalStore;
  usage: UsageLedger;
  /** Carries out actions the verifier found eligible. */
  executor: ActionExecutor;
  providers: ConsoleProviders;
  /** Stored evidence (large tool results, browser artifacts) `query_audit evidence_id=…` reads; unset, it answers unavailable. */
  evidence?: EvidenceStore;
  notifier: Notifier;
  breakGlass: BreakGlassConfig;
  /** Events of one resource further apart than this start a new incident. */
  incidentWindowMs: number;
  /** The registry the discovery tools search (late-bound: it holds them too). */
  registry(): ToolRegistry;
}
