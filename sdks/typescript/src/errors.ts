/** Errors a handler throws to steer its job's next step, and errors the SDK raises. */

/** Fail the job for good: no retry, whatever attempts are left. */
export class NonRetryableError extends Error {
  /** The error kind recorded with the attempt (default: the class name). */
  readonly kind: string;

  constructor(message: string, options: { kind?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "NonRetryableError";
    this.kind = options.kind ?? this.name;
  }
}

/** Fail this attempt and ask for the next one at a given time instead of the policy's backoff. */
export class RetryAfterError extends Error {
  /** When the next attempt may start. */
  readonly at: Date;

  constructor(message: string, retryAfter: number | Date) {
    super(message);
    this.name = "RetryAfterError";
    this.at = retryAfter instanceof Date ? retryAfter : new Date(Date.now() + retryAfter);
  }
}

/**
 * The downstream the handler calls pushed back (e.g. HTTP 429): the attempt
 * fails, its rate limits slow down (PushBack in worker_service.proto) and,
 * with `retryAfterMs`, the next attempt waits that long.
 */
export class ThrottledError extends Error {
  readonly retryAfterMs: number | undefined;

  constructor(message: string, retryAfterMs?: number) {
    super(message);
    this.name = "ThrottledError";
    this.retryAfterMs = retryAfterMs;
  }
}

/** A call to the coordinator failed with a status the SDK does not retry. */
export class WorkflowJobsError extends Error {
  constructor(
    message: string,
    /** The gRPC status code (numeric, as @grpc/grpc-js' `status`). */
    readonly code: number,
    /** Its name, e.g. "UNAUTHENTICATED". */
    readonly codeName: string,
  ) {
    super(message);
    this.name = "WorkflowJobsError";
  }
}
