import { randomUUID } from "node:crypto";

/** ARM's terminal and running states of an asynchronous operation. */
export type OperationStatus = "InProgress" | "Succeeded" | "Failed" | "Canceled";

/** ARM's error detail (`{code, message}`), as operation results and error responses carry it. */
export interface ArmErrorDetail {
  code: string;
  message: string;
}

/**
 * A provider's side effect when an operation succeeds, by name (registered with
 * `LocalArm.hooks`) and plain data, so an operation still running when the server stops resumes
 * from its saved state with the same effect.
 */
export interface OperationHook {
  name: string;
  data?: unknown;
}

/** One long-running operation of the local Resource Manager. */
export interface ArmOperation {
  id: string;
  /** The resource it acts on (the 409 `Conflict` key). */
  resourceId: string;
  /** `Microsoft.ContainerService`…: the provider whose `locations/{location}/operations/{id}` serves it. */
  namespace: string;
  location: string;
  subscriptionId: string;
  status: OperationStatus;
  polls: number;
  /** Polls answered `InProgress` before the operation ends. */
  pollsBeforeDone: number;
  startTime: string;
  endTime?: string;
  error?: ArmErrorDetail;
  /** Applies the change (Succeeded), or rolls back the provisioning state (Failed/Canceled). */
  complete(outcome: OperationStatus): void;
  /** True for a delete: the Location result is 204, not the resource. */
  isDelete: boolean;
  /** What it does (a PUT's provisioning, a DELETE, a POST action) and its provider's hook: what {@link ArmOperation.complete} is made of. */
  kind: "put" | "delete" | "action";
  hook?: OperationHook;
  /** How it ends once polled enough (Succeeded unless a test planned otherwise). */
  outcome: OperationStatus;
}

/** An operation as the state file keeps it (everything but `complete`). */
export type OperationRecord = Omit<ArmOperation, "complete">;

/** An outcome a test has planned for the next operation on a matching resource. */
export interface PlannedOutcome {
  resource: RegExp;
  status: "Failed" | "Canceled";
  error: ArmErrorDetail;
  /** Polls answered InProgress first (default: the server's `pollsBeforeDone`). */
  afterPolls?: number;
}

/** The operations table: start, advance on each poll, and the 409 of a concurrent operation. */
export class Operations {
  readonly #byId = new Map<string, ArmOperation>();
  readonly planned: PlannedOutcome[] = [];

  constructor(private readonly defaults: { pollsBeforeDone: () => number }) {}

  /** The running operation on `resourceId`, if any (ARM refuses a second one with 409). */
  running(resourceId: string): ArmOperation | undefined {
    const key = resourceId.toLowerCase();
    for (const op of this.#byId.values())
      if (
        op.status === "InProgress" &&
        (key === op.resourceId.toLowerCase() || key.startsWith(`${op.resourceId.toLowerCase()}/`))
      )
        return op;
    return undefined;
  }

  start(
    init: Omit<ArmOperation, "id" | "status" | "polls" | "startTime" | "pollsBeforeDone" | "outcome">,
  ): ArmOperation {
    const plannedIndex = this.planned.findIndex((p) => p.resource.test(init.resourceId));
    const plan = plannedIndex >= 0 ? this.planned.splice(plannedIndex, 1)[0] : undefined;
    const op: ArmOperation = {
      ...init,
      id: randomUUID(),
      status: "InProgress",
      polls: 0,
      pollsBeforeDone: plan?.afterPolls ?? this.defaults.pollsBeforeDone(),
      startTime: new Date().toISOString(),
      outcome: plan?.status ?? "Succeeded",
    };
    if (plan) op.error = plan.error;
    this.#add(op);
    if (op.pollsBeforeDone <= 0) (op as ArmOperation & { advance: () => void }).advance();
    return op;
  }

  #add(op: ArmOperation): void {
    (op as ArmOperation & { advance: () => void }).advance = () => {
      op.status = op.outcome;
      op.endTime = new Date().toISOString();
      op.complete(op.outcome);
    };
    this.#byId.set(op.id, op);
  }

  /** One poll: counts it, and ends the operation once it has been polled enough. */
  poll(id: string): ArmOperation | undefined {
    const op = this.#byId.get(id);
    if (!op) return undefined;
    if (op.status === "InProgress") {
      op.polls += 1;
      if (op.polls > op.pollsBeforeDone) (op as ArmOperation & { advance: () => void }).advance();
    }
    return op;
  }

  /** Ends every running operation now (tests, and a stack shutting down). */
  settleAll(): void {
    for (const op of this.#byId.values())
      if (op.status === "InProgress") (op as ArmOperation & { advance: () => void }).advance();
  }

  all(): ArmOperation[] {
    return [...this.#byId.values()];
  }

  /** Every operation as plain data (the state file). */
  records(): OperationRecord[] {
    return this.all().map(({ complete: _complete, ...rest }) => {
      const { advance: _advance, ...record } = rest as OperationRecord & { advance?: unknown };
      return record;
    });
  }

  /** Puts saved operations back; a running one ends as planned when polled, with `complete` made anew. */
  restore(records: readonly OperationRecord[], complete: (op: OperationRecord) => ArmOperation["complete"]): void {
    for (const record of records) this.#add({ ...record, complete: complete(record) });
  }
}

/** The Azure-AsyncOperation status body. */
export function operationStatusJson(op: ArmOperation): Record<string, unknown> {
  return {
    id: `/subscriptions/${op.subscriptionId}/providers/${op.namespace}/locations/${op.location}/operations/${op.id}`,
    name: op.id,
    status: op.status,
    startTime: op.startTime,
    ...(op.endTime ? { endTime: op.endTime } : {}),
    ...(op.status === "Failed" || op.status === "Canceled"
      ? { error: op.error ?? { code: op.status, message: `The operation was ${op.status.toLowerCase()}.` } }
      : {}),
  };
}
