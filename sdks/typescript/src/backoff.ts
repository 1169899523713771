/**
 * Capped exponential backoff, the formula of RetryPolicy in
 * protos/workflowjobs/v1/job.proto (the Python SDK's worker_sdk/_backoff.py):
 *
 *   base  = min(initial * multiplier ** (n - 1), maximum)   // n = failures so far, 1-based
 *   delay = base * (1 - jitter * u)                          // u uniform in [0, 1)
 *
 * Jitter only shortens a delay, so `maximum` is a real cap. Delays are in milliseconds.
 */

/** Status codes a retry loop waits out: the call may succeed when sent again. */
export const RETRYABLE_CODES: ReadonlySet<number> = new Set([
  14, // UNAVAILABLE
  4, // DEADLINE_EXCEEDED
  8, // RESOURCE_EXHAUSTED
  10, // ABORTED
  1, // CANCELLED
  2, // UNKNOWN
  13, // INTERNAL
]);

/** The same codes by name, as OutcomeResult.error_code carries them. */
export const RETRYABLE_NAMES: ReadonlySet<string> = new Set([
  "UNAVAILABLE",
  "DEADLINE_EXCEEDED",
  "RESOURCE_EXHAUSTED",
  "ABORTED",
  "CANCELLED",
  "UNKNOWN",
  "INTERNAL",
]);

export interface BackoffConfig {
  initialMs: number;
  maximumMs: number;
  multiplier?: number;
  jitter?: number;
}

/** The delay after `failures` consecutive failures (1-based), in milliseconds. */
export function backoffDelay(failures: number, config: BackoffConfig, u: number = Math.random()): number {
  const multiplier = Math.max(1, config.multiplier ?? 2);
  const jitter = Math.min(1, Math.max(0, config.jitter ?? 0));
  const initial = Math.max(0, config.initialMs);
  const exponent = Math.max(0, failures - 1);
  const base = Math.min(initial * multiplier ** exponent, config.maximumMs);
  return base * (1 - jitter * u);
}

/** Consecutive failures and the delay after each; `reset()` after a success. */
export class Backoff {
  private failures = 0;

  constructor(private readonly config: BackoffConfig) {}

  nextDelay(): number {
    this.failures += 1;
    return backoffDelay(this.failures, this.config);
  }

  reset(): void {
    this.failures = 0;
  }
}
