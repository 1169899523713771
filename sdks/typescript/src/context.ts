/** What a handler knows about the job it runs: `(payload, ctx) => result`. */
import type { Span } from "@opentelemetry/api";
import { trace, ROOT_CONTEXT } from "@opentelemetry/api";
import type { Client, EnqueueOptions } from "./client";
import { jobSpec } from "./client";
import type { Job, WorkflowRef } from "./gen/workflowjobs/v1/job";
import type { Logger } from "./log";

/** Why `ctx.signal` was aborted. */
export const CancelReason = {
  CANCEL_REQUESTED: "cancel requested",
  LEASE_LOST: "lease lost",
  WORKER_SHUTDOWN: "worker shutting down",
  DEADLINE_EXCEEDED: "deadline exceeded",
} as const;
export type CancelReason = (typeof CancelReason)[keyof typeof CancelReason];

/** The error `ctx.signal.reason` holds once aborted. */
export class JobCancelledError extends Error {
  constructor(readonly reason: CancelReason) {
    super(reason);
    this.name = "JobCancelledError";
  }
}

/** The longest push-back the coordinator holds a rate limit for: 366 days. */
export const MAX_PUSH_BACK_MS = 366 * 24 * 3600 * 1000;

/** Prefix of the idempotency key of a child job: `child:<parent id>:<key>`. */
export const CHILD_KEY_PREFIX = "child";

export interface ChildOptions extends Omit<EnqueueOptions, "idempotencyKey" | "parentJobId"> {
  /** Names the child among this job's children (default: `#n`, the n-th keyless call of the attempt). */
  key?: string;
}

export class JobContext<P = unknown> {
  /** The job as pushed (payload undecoded in `job.payload`). */
  readonly job: Job;
  /** The payload, decoded (JSON parsed; bytes as a Buffer). */
  readonly payload: P;
  readonly leaseToken: string;
  readonly workerId: string;
  /** When the lease expires (moved on by each heartbeat). */
  leaseExpireTime: Date | undefined;
  /** Aborted on a cancel request, a lost lease, the job's deadline, or the end of the shutdown grace. */
  readonly signal: AbortSignal;
  /** Aborted when the worker starts draining (SIGTERM): finish or checkpoint within the grace. */
  readonly stopping: AbortSignal;
  /** The attempt's `execute <job type>` span (a no-op span without a tracer provider). */
  readonly span: Span;
  readonly logger: Logger;
  /** Set by `throttle()`: the push-back reported with this attempt's outcome. */
  pushBackMs: number | null | undefined;
  private readonly cancel = new AbortController();
  private readonly stop = new AbortController();
  private lost = false;
  private children = 0;

  constructor(args: {
    job: Job;
    payload: P;
    leaseToken: string;
    leaseExpireTime: Date | undefined;
    workerId: string;
    span: Span;
    logger: Logger;
    client: Client | undefined;
    onHeartbeat: () => void;
  }) {
    this.job = args.job;
    this.payload = args.payload;
    this.leaseToken = args.leaseToken;
    this.leaseExpireTime = args.leaseExpireTime;
    this.workerId = args.workerId;
    this.span = args.span;
    this.logger = args.logger;
    this.client = args.client;
    this.onHeartbeat = args.onHeartbeat;
    this.signal = this.cancel.signal;
    this.stopping = this.stop.signal;
  }

  private readonly client: Client | undefined;
  private readonly onHeartbeat: () => void;

  get jobId(): string {
    return this.job.id;
  }
  get jobType(): string {
    return this.job.jobType;
  }
  get tenantId(): string {
    return this.job.tenantId;
  }
  /** This attempt's number, 1-based. */
  get attempt(): number {
    return this.job.attempt;
  }
  get maxAttempts(): number {
    return this.job.maxAttempts;
  }
  get workflow(): WorkflowRef | undefined {
    return this.job.workflow;
  }
  /** Why `signal` was aborted, if it was. */
  get cancelReason(): CancelReason | undefined {
    return this.signal.aborted ? (this.signal.reason as JobCancelledError).reason : undefined;
  }
  isCancelled(): boolean {
    return this.signal.aborted;
  }
  isStopping(): boolean {
    return this.stopping.aborted;
  }
  /**
   * True once the coordinator answered the lease LOST, whatever aborted
   * `signal` first (a cancel request, the deadline, the shutdown): the worker
   * then reports nothing for this attempt.
   */
  get leaseLost(): boolean {
    return this.lost;
  }

  /** Ask for an early heartbeat of this job's lease (leases are heartbeated anyway). */
  heartbeat(): void {
    this.onHeartbeat();
  }

  /**
   * Report that the downstream pushed back (e.g. HTTP 429): every rate limit
   * covering the job slows down (docs/limits.md). Travels with the outcome,
   * whatever it is. `retryAfterMs`: how long the downstream asked to wait
   * (none: one start interval at the slowed rate); longer than 366 days (what
   * the coordinator holds a limit for), 366 days are reported, with a warning
   * in the job's log. Calling it again keeps the longest.
   */
  throttle(retryAfterMs?: number): void {
    if (retryAfterMs !== undefined && !(retryAfterMs >= 0 && retryAfterMs <= Number.MAX_VALUE)) {
      throw new RangeError(`retryAfterMs must be a finite number of milliseconds >= 0, not ${retryAfterMs}`);
    }
    let hold = retryAfterMs ?? 0;
    if (hold > MAX_PUSH_BACK_MS) {
      this.logger.warning(
        `push-back retry_after of ${hold} ms is longer than the coordinator holds a rate limit ` +
          "(366 days); reporting 366 days (the attempt's outcome is not affected)",
      );
      hold = MAX_PUSH_BACK_MS;
    }
    if (retryAfterMs === undefined) {
      if (this.pushBackMs === undefined) this.pushBackMs = null;
    } else if (this.pushBackMs === undefined || this.pushBackMs === null || hold > this.pushBackMs) {
      this.pushBackMs = hold;
    }
  }

  /**
   * Enqueue a child job: this job's tenant and workflow refs unless given,
   * `parent_job_id` set, deduplicated per parent by its idempotency key
   * `child:<this job's id>:<key>` (`#n` for the n-th keyless call of this
   * attempt), its trace under this attempt's span.
   */
  async enqueue(jobType: string, payload?: unknown, options: ChildOptions = {}): Promise<Job> {
    if (this.client === undefined) throw new Error("this context has no client to enqueue with");
    const { key, ...rest } = options;
    const name = key ?? `#${this.children++}`;
    const spec = jobSpec(jobType, payload, {
      tenantId: this.tenantId,
      workflow: this.job.workflow,
      ...rest,
      idempotencyKey: `${CHILD_KEY_PREFIX}:${this.jobId}:${name}`,
      parentJobId: this.jobId,
    });
    const { job } = await this.client.enqueueSpec(spec, trace.setSpan(ROOT_CONTEXT, this.span));
    return job;
  }

  /** @internal */
  abort(reason: CancelReason): void {
    if (reason === CancelReason.LEASE_LOST) this.lost = true;
    if (!this.cancel.signal.aborted) this.cancel.abort(new JobCancelledError(reason));
  }

  /** @internal */
  drain(): void {
    if (!this.stop.signal.aborted) this.stop.abort(new JobCancelledError(CancelReason.WORKER_SHUTDOWN));
  }
}
