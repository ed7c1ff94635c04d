/**
 * Domain errors: what went wrong, in the domain's words, with no transport in them. Each transport
 * maps them in one place (HTTP: `mapErrorToResult` in `shared/http/envelope.ts`, which both the
 * Functions app and the job API use; the local durable management API has its own), and anything
 * that is not a DomainError is a logged 500 there.
 */
export interface FieldIssue {
  readonly loc: readonly (string | number)[];
  readonly msg: string;
  readonly type: string;
}

export abstract class DomainError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The request itself is malformed: unparseable JSON, wrong content type, a malformed identifier or parameter. */
export class InvalidRequestError extends DomainError {}

/** Missing or invalid credentials. The message never says which check failed in detail. */
export class UnauthorizedError extends DomainError {
  constructor(message = "authentication required") {
    super(message);
  }
}

/**
 * The token is valid, but the act needs a recent interactive sign-in and the token's `auth_time`
 * is older than `maxAgeSeconds` (or missing). HTTP: 401 with the RFC 9470 step-up challenge
 * (`WWW-Authenticate: Bearer error="insufficient_user_authentication", max_age=…`).
 */
export class ReauthenticationRequiredError extends UnauthorizedError {
  constructor(
    readonly maxAgeSeconds: number,
    message = `re-authentication required: sign in again (within the last ${maxAgeSeconds} s)`,
  ) {
    super(message);
  }
}

/** Authenticated, but the caller's role is below what the act needs. */
export class ForbiddenError extends DomainError {}

/** The resource (or route) does not exist. */
export class NotFoundError extends DomainError {}

/** The route exists, but not for this method. */
export class MethodNotAllowedError extends DomainError {
  constructor(readonly allowed: readonly string[]) {
    super("method not allowed");
  }
}

/** The resource's state does not allow the operation (or a key is bound to another request). */
export class ConflictError extends DomainError {}

/** A conditional write needs a precondition (e.g. `If-Match`) the request did not give. */
export class PreconditionRequiredError extends DomainError {}

/**
 * A precondition the request gave (e.g. `If-Match`) is false for the current resource: a stale
 * version (HTTP 412, RFC 9110 §13.1.1). A state that forbids the act whatever the version is a
 * {@link ConflictError}.
 */
export class PreconditionFailedError extends DomainError {}

/** The input parsed, but fields fail their rules; each issue names its field path (`loc`). */
export class ValidationError extends DomainError {
  constructor(readonly issues: readonly FieldIssue[]) {
    super("validation failed");
  }
}

/** One field is invalid: a ValidationError with a single issue at `loc`. */
export class InvalidFieldError extends ValidationError {
  constructor(loc: readonly (string | number)[], msg: string, type = "value_error") {
    super([{ loc, msg, type }]);
  }
}

/** Admission refused because the queue is full; `retryAfterSeconds` when a wait can be suggested. */
export class QueueFullError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** The input is larger than the act accepts. */
export class PayloadTooLargeError extends DomainError {
  constructor(readonly limitBytes: number) {
    super(`request body exceeds ${limitBytes} bytes`);
  }
}

/**
 * A dependency this act needs is not configured, not ready or restarting: try again later
 * (`retryAfterSeconds` when a wait can be suggested).
 */
export class DependencyUnavailableError extends DomainError {
  constructor(
    message: string,
    readonly retryAfterSeconds?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** A dependency answered in a way this service cannot use, or could not be reached mid-act. */
export class DependencyFailedError extends DomainError {}

/**
 * A shard could not finish. `retryable` is false when another attempt would fail the same way
 * (out of memory, no node large enough, image missing), so the job fails at once.
 */
export class ShardFailedError extends DomainError {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}
