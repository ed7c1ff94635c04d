import { randomUUID } from "node:crypto";

/** ARM's terminal and running states of an asynchronous operation. */
export type OperationStatus = "InProgress" | "Succeeded" | "Failed" | "Canceled";

/** ARM's error detail (`{code, message}`), as operation results and error responses carry it. */
export interface ArmErrorDetail {
  code: string;
  message: string;
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
}

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

  start(init: Omit<ArmOperation, "id" | "status" | "polls" | "startTime" | "pollsBeforeDone">): ArmOperation {
    const plannedIndex = this.planned.findIndex((p) => p.resource.test(init.resourceId));
    const plan = plannedIndex >= 0 ? this.planned.splice(plannedIndex, 1)[0] : undefined;
    const op: ArmOperation = {
      ...init,
      id: randomUUID(),
      status: "InProgress",
      polls: 0,
      pollsBeforeDone: plan?.afterPolls ?? this.defaults.pollsBeforeDone(),
      startTime: new Date().toISOString(),
    };
    if (plan) op.error = plan.error;
    const outcome: OperationStatus = plan?.status ?? "Succeeded";
    const advance = () => {
      op.status = outcome;
      op.endTime = new Date().toISOString();
      op.complete(outcome);
    };
    this.#byId.set(op.id, op);
    (op as ArmOperation & { advance: () => void }).advance = advance;
    if (op.pollsBeforeDone <= 0) advance();
    return op;
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
