/**
 * One attempt: from a leased job to its outcome (the Python SDK's
 * worker_sdk/_execution.py). Decode the payload (one that does not decode
 * fails the attempt for good), run the handler inside its `execute` span,
 * turn what happened into a Completion, a Failure or a Release, end the span
 * and log one line per failed attempt (a completed one at DEBUG).
 *
 * The handler's promise races the attempt's interruption: the worker settles
 * an attempt itself when its cancel grace or execution timeout passes, or when
 * the process is about to exit with the handler still running (shutdown);
 * whatever the handler does later is ignored.
 */
import type { Span } from "@opentelemetry/api";
import { context as otelContext, trace } from "@opentelemetry/api";
import { decodePayload, encodePayload } from "./codec";
import { CancelReason, type JobContext } from "./context";
import { NonRetryableError, RetryAfterError, ThrottledError } from "./errors";
import type { Completion, Failure, JobOutcome, LeasedJob, Release } from "./gen/workflowjobs/v1/worker_service";
import { backoffDelay } from "./backoff";
import { finishExecution, startExecution } from "./tracing";

export type Outcome = { $case: "completed"; completed: Completion } | { $case: "failed"; failed: Failure } | { $case: "released"; released: Release };

/** The coordinator keeps at most the last 16 KiB of a traceback. */
export const MAX_TRACEBACK_BYTES = 16 * 1024;

export type HandlerFn = (payload: any, ctx: JobContext<any>) => unknown;

/** A worker-side retry policy of one handler (jobs' own policies still apply on the coordinator). */
export interface HandlerRetryPolicy {
  maxAttempts?: number;
  nonRetryableErrorKinds?: string[];
  initialBackoffMs?: number;
  backoffMultiplier?: number;
  maxBackoffMs?: number;
  jitter?: number;
}

export interface HandlerSpec {
  jobType: string;
  fn: HandlerFn;
  retryPolicy?: HandlerRetryPolicy;
  /** Checks the decoded payload before the handler runs (HandlerOptions.validate). */
  validate?: (payload: unknown) => unknown;
}

export interface Attempt {
  key: string;
  leased: LeasedJob;
  ctx: JobContext<any>;
  handler: HandlerSpec | undefined;
  leaseDurationMs: number | undefined;
  /** Resolves with the outcome once the attempt ended. */
  done?: Promise<Outcome>;
  /** Settles the attempt now with `outcome` (the handler's later result is ignored). */
  interrupt: (outcome: Outcome) => void;
  /** Resolves once the handler's own code has returned or thrown (interrupted or not). */
  handlerSettled?: Promise<void>;
  /** The shutdown aborted ctx.signal: a handler that then throws hands the job back. */
  stoppedByShutdown?: boolean;
  cancelRequested: boolean;
  handedBack: boolean;
  timers: NodeJS.Timeout[];
}

/** `text` with each NUL written `\x00` (the coordinator refuses strings holding U+0000). */
export function shownText(text: string): string {
  return text.includes("\u0000") ? text.replaceAll("\u0000", "\\x00") : text;
}

function tail(text: string): string {
  const data = Buffer.from(text, "utf8");
  if (data.length <= MAX_TRACEBACK_BYTES) return text;
  const kept = data.subarray(data.length - MAX_TRACEBACK_BYTES).toString("utf8").replace(/^\uFFFD+/, "");
  return `[${data.length - Buffer.byteLength(kept)} earlier bytes cut]\n${kept}`;
}

export function failure(
  error: string,
  kind: string,
  options: { nonRetryable?: boolean; retryTime?: Date; traceback?: string } = {},
): Outcome {
  return {
    $case: "failed",
    failed: {
      error: shownText(error),
      errorKind: shownText(kind),
      nonRetryable: options.nonRetryable ?? false,
      retryTime: options.retryTime,
      traceback: options.traceback ? shownText(tail(options.traceback)) : "",
    },
  };
}

export function release(reason: string): Outcome {
  return { $case: "released", released: { reason: shownText(reason), payload: undefined } };
}

export function jobOutcome(jobId: string, leaseToken: string, outcome: Outcome, pushBackMs: number | null | undefined): JobOutcome {
  let pushBack: JobOutcome["pushBack"];
  if (pushBackMs !== undefined) {
    pushBack = {
      retryAfter:
        pushBackMs === null
          ? undefined
          : { seconds: BigInt(Math.floor(pushBackMs / 1000)), nanos: Math.round((pushBackMs % 1000) * 1e6) },
    };
  }
  return { jobId, leaseToken, outcome, pushBack };
}

/** The kind of a thrown value: its class name (`TypeError`, a custom class), as Python's type name. */
export function errorKind(error: unknown): string {
  if (error instanceof NonRetryableError) return error.kind;
  if (error instanceof Error) {
    const ctor = (error.constructor as { name?: string } | undefined)?.name;
    return ctor && ctor !== "Error" ? ctor : error.name || "Error";
  }
  return "Error";
}

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return `${errorKind(error)}: ${message}`;
}

function failureFromError(handler: HandlerSpec, ctx: JobContext<any>, error: unknown): Outcome {
  const traceback = error instanceof Error ? error.stack ?? "" : "";
  const text = describe(error);
  const kind = errorKind(error);
  ctx.span.recordException(error instanceof Error ? error : String(error));
  if (error instanceof NonRetryableError) return failure(text, kind, { nonRetryable: true, traceback });
  if (error instanceof RetryAfterError) return failure(text, kind, { retryTime: error.at, traceback });
  if (error instanceof ThrottledError) {
    ctx.throttle(error.retryAfterMs);
    if (error.retryAfterMs !== undefined) {
      return failure(text, kind, { retryTime: new Date(Date.now() + error.retryAfterMs), traceback });
    }
  }
  const policy = handler.retryPolicy;
  if (policy !== undefined) {
    if (policy.nonRetryableErrorKinds?.includes(kind)) return failure(text, kind, { nonRetryable: true, traceback });
    if (policy.maxAttempts !== undefined && ctx.attempt >= policy.maxAttempts) {
      return failure(text, kind, { nonRetryable: true, traceback });
    }
    if (policy.initialBackoffMs !== undefined) {
      const delay = backoffDelay(ctx.attempt, {
        initialMs: policy.initialBackoffMs,
        maximumMs: policy.maxBackoffMs ?? Infinity,
        multiplier: policy.backoffMultiplier,
        jitter: policy.jitter,
      });
      return failure(text, kind, { retryTime: new Date(Date.now() + delay), traceback });
    }
  }
  return failure(text, kind, { traceback });
}

function durationMs(d: { seconds: bigint; nanos: number } | undefined): number {
  return d === undefined ? 0 : Number(d.seconds) * 1000 + d.nanos / 1e6;
}

/** Run the attempt's handler; never rejects for anything the handler does. */
export async function runAttempt(attempt: Attempt, workerId: string, span: Span): Promise<Outcome> {
  const ctx = attempt.ctx;
  const started = performance.now();
  let interrupt!: (o: Outcome) => void;
  const interrupted = new Promise<Outcome>((resolve) => (interrupt = resolve));
  attempt.interrupt = interrupt;
  const own = invoke(attempt, workerId, span);
  attempt.handlerSettled = own.then(() => undefined);
  let outcome = await Promise.race([own, interrupted]);
  if (attempt.stoppedByShutdown && outcome.$case === "failed") {
    // Stopped by the shutdown (its ctx.signal): handed back, not failed.
    outcome = release(CancelReason.WORKER_SHUTDOWN);
  }
  for (const timer of attempt.timers) clearTimeout(timer);
  const seconds = (performance.now() - started) / 1000;
  const cancelled = attempt.cancelRequested;
  if (cancelled && outcome.$case === "completed") {
    ctx.logger.info(`job ${ctx.jobId} returned after its cancel was requested; it ends CANCELLED`);
  }
  finishExecution(span, cancelled ? "cancelled" : outcome.$case, outcome.$case === "failed" ? outcome.failed : undefined);
  logOutcome(ctx, outcome, seconds);
  return outcome;
}

async function invoke(attempt: Attempt, workerId: string, span: Span): Promise<Outcome> {
  const ctx = attempt.ctx;
  const handler = attempt.handler;
  if (handler === undefined) {
    return failure(`UnknownJobType: worker ${workerId} has no handler for '${ctx.jobType}'`, "UnknownJobType");
  }
  let payload: unknown;
  try {
    payload = decodePayload(attempt.leased.job?.payload);
  } catch (error) {
    return failure(`PayloadDecodeError: ${(error as Error).message}`, "PayloadDecodeError", {
      nonRetryable: true,
      traceback: (error as Error).stack,
    });
  }
  if (handler.validate !== undefined) {
    try {
      payload = handler.validate(payload);
    } catch (error) {
      // A payload that does not validate would not validate on a retry either.
      const message = error instanceof Error ? error.message : String(error);
      return failure(`PayloadValidationError: ${message}`, "PayloadValidationError", {
        nonRetryable: true,
        traceback: error instanceof Error ? error.stack : undefined,
      });
    }
  }
  (ctx as { payload: unknown }).payload = payload;
  const timeoutMs = durationMs(attempt.leased.job?.executionTimeout);
  if (timeoutMs > 0) {
    attempt.timers.push(
      setTimeout(() => {
        ctx.abort(CancelReason.DEADLINE_EXCEEDED);
        attempt.interrupt(
          failure(`TimeoutError: execution timeout of ${timeoutMs / 1000}s exceeded`, "TimeoutError"),
        );
      }, timeoutMs),
    );
  }
  let result: unknown;
  try {
    result = await otelContext.with(trace.setSpan(otelContext.active(), span), () => handler.fn(payload, ctx));
  } catch (error) {
    return failureFromError(handler, ctx, error);
  }
  try {
    return { $case: "completed", completed: { result: encodePayload(result) } };
  } catch (error) {
    return failure(`PayloadEncodeError: ${(error as Error).message}`, "PayloadEncodeError", { nonRetryable: true });
  }
}

function logOutcome(ctx: JobContext<any>, outcome: Outcome, seconds: number): void {
  const what = `job ${ctx.jobId} (${ctx.jobType}) attempt ${ctx.attempt}/${ctx.maxAttempts}`;
  if (outcome.$case === "failed") {
    const f = outcome.failed;
    const next = f.nonRetryable ? "; not retryable" : ctx.maxAttempts > 0 && ctx.attempt >= ctx.maxAttempts ? "; no attempts left" : "";
    ctx.logger.warning(`${what} failed after ${seconds.toFixed(3)}s: ${f.error}${next}`);
  } else if (outcome.$case === "completed") {
    ctx.logger.debug(`${what} completed in ${seconds.toFixed(3)}s`);
  } else {
    ctx.logger.debug(`${what} released: ${outcome.released.reason}`);
  }
}

export { startExecution };
