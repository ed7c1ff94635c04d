/**
 * Domain errors. Each transport has one mapper that turns these into the spec's error envelope
 * (`{detail, request_id}`); anything that is not a DomainError becomes a logged 500.
 */
export interface FieldIssue {
  readonly loc: readonly (string | number)[];
  readonly msg: string;
  readonly type: string;
}

export abstract class DomainError extends Error {
  abstract readonly status: number;
  /** Extra response headers (e.g. Retry-After, Allow). */
  readonly headers: Readonly<Record<string, string>> = {};
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** 400: malformed JSON, wrong content type, malformed path/query parameter or identifier. */
export class InvalidRequestError extends DomainError {
  readonly status = 400;
}

/** 401: missing or invalid credentials. The message never says which check failed in detail. */
export class UnauthorizedError extends DomainError {
  readonly status = 401;
  constructor(message = "authentication required") {
    super(message);
  }
}

/** 403: authenticated, but the caller's role is below the route's floor. */
export class ForbiddenError extends DomainError {
  readonly status = 403;
}

/** 404: the resource or route does not exist. */
export class NotFoundError extends DomainError {
  readonly status = 404;
}

/** 405: the route exists but not for this method. */
export class MethodNotAllowedError extends DomainError {
  readonly status = 405;
  override readonly headers: Readonly<Record<string, string>>;
  constructor(readonly allowed: readonly string[]) {
    super("method not allowed");
    this.headers = { Allow: allowed.join(", ") };
  }
}

/** 409: the resource's state does not allow the operation. */
export class ConflictError extends DomainError {
  readonly status = 409;
}

/** 422: the body parsed but its fields fail the schema. */
export class ValidationError extends DomainError {
  readonly status = 422;
  constructor(readonly issues: readonly FieldIssue[]) {
    super("validation failed");
  }
}

/** 429: admission refused; Retry-After when a wait can be suggested. */
export class AdmissionRejectedError extends DomainError {
  readonly status = 429;
  override readonly headers: Readonly<Record<string, string>>;
  constructor(message: string, readonly retryAfterSeconds?: number) {
    super(message);
    this.headers = retryAfterSeconds === undefined ? {} : { "Retry-After": String(retryAfterSeconds) };
  }
}

/** 502/503/504: a dependency is unreachable or restarting. */
export class UpstreamUnavailableError extends DomainError {
  override readonly headers: Readonly<Record<string, string>>;
  constructor(
    message: string,
    readonly status: 502 | 503 | 504 = 503,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.headers = retryAfterSeconds === undefined ? {} : { "Retry-After": String(retryAfterSeconds) };
  }
}

/** 413: the request body is larger than the route accepts. */
export class PayloadTooLargeError extends DomainError {
  readonly status = 413;
  constructor(readonly limitBytes: number) {
    super(`request body exceeds ${limitBytes} bytes`);
  }
}
