/**
 * The worker: holds one AcquireJobs stream, runs handlers, heartbeats leases,
 * reports outcomes (docs/protocol.md says what each step must do).
 *
 * Flow control is by credit, and credits are slots: the worker grants one
 * credit per free handler slot and every pushed job starts at once. Per
 * stream: `running + outstanding credit <= concurrency`, the grant recomputed
 * from it each time (outstanding credit starts at zero on a new stream).
 * Grants are coalesced: sent at once when at least max(1, concurrency / 4)
 * slots are free, else after ~2 ms; while outcomes travel on the stream the
 * credit their jobs free rides on their OutcomeBatch (a 10 ms timer grants it
 * should the batch be held up).
 *
 * Connection states:
 *
 *     (new) --run--> connecting --accepted--> streaming --broken--> backoff --> connecting
 *                        |                        |
 *                        +------- stop -----------+--> draining --> stopped
 *
 * Shutdown (shutdown(), SIGTERM/SIGINT under run()): stop acquiring (close the
 * request side) and abort every ctx.stopping; wait for handlers up to
 * `shutdownGraceMs` (heartbeats go on); abort the ctx.signal of what still
 * runs and give it a second to return (one that throws then is handed back
 * with a Release; one that returns reports its result). A handler still
 * running after that can still touch the outside world, so its lease is kept
 * and heartbeated: under run() with its signal handlers (the worker owns the
 * process) its job is handed back and the process exits right after the
 * Release is flushed; otherwise the worker waits, heartbeating, until it
 * returns and reports what it returned. Then flush outcomes; stop heartbeats,
 * close the channel. A second signal skips the rest of the grace.
 */
import * as os from "node:os";
import * as crypto from "node:crypto";
import * as grpc from "@grpc/grpc-js";
import { Backoff } from "./backoff";
import { Client, statusName } from "./client";
import { CancelReason, JobContext } from "./context";
import { WorkflowJobsError } from "./errors";
import {
  type Attempt,
  type HandlerFn,
  type HandlerRetryPolicy,
  type HandlerSpec,
  type Outcome,
  failure,
  jobOutcome,
  release,
  runAttempt,
  startExecution,
} from "./execution";
import {
  type AcquireJobsRequest,
  type AcquireJobsResponse,
  type DrainRequested,
  type JobBatch,
  type LeaseRef,
  type LeaseStatus,
  LeaseState,
  type WorkerAccepted,
  WorkerServiceClient,
} from "./gen/workflowjobs/v1/worker_service";
import { type LogSink, type Logger, rootLogger } from "./log";
import { Heartbeater } from "./heartbeat";
import { OutcomeReporter, StreamLink, DEFAULT_REPORTER } from "./outcomes";
import { Connection, type ConnectionOptions } from "./transport";
import { VERSION } from "./version";

const FATAL_STREAM_CODES = new Set([
  grpc.status.UNAUTHENTICATED,
  grpc.status.PERMISSION_DENIED,
  grpc.status.INVALID_ARGUMENT,
  grpc.status.UNIMPLEMENTED,
]);

export interface WorkerOptions extends ConnectionOptions {
  /** Handler slots: the most jobs running at once (default 100). */
  concurrency?: number;
  /** Stable id of this worker process (default `<host>-<pid>-<random>`). */
  workerId?: string;
  /** Job types to ask for (default: every registered handler). */
  jobTypes?: string[];
  /** Most jobs the coordinator may push in one message (default 100). */
  maxBatchSize?: number;
  /** Milliseconds between heartbeats (default: the coordinator's recommendation, at most a third of the shortest lease). */
  heartbeatIntervalMs?: number;
  /** Milliseconds running handlers get to finish on shutdown before their jobs are handed back (default 30 s). */
  shutdownGraceMs?: number;
  /** Milliseconds a handler may run on after a cancel request (ctx.signal aborted at once) before the attempt ends (default 5 s). */
  cancelGraceMs?: number;
  reconnectInitialBackoffMs?: number;
  reconnectMaxBackoffMs?: number;
  /** Milliseconds to keep reporting outcomes at shutdown (default: the shutdown grace, at least 1 s). */
  outcomeFlushTimeoutMs?: number;
  /** Where log records go (default: stderr, as WFJOBS_LOG_LEVEL / WFJOBS_LOG_FORMAT say). */
  logSink?: LogSink;
}

export interface HandlerOptions<P = any> {
  /** Applied by the worker to this handler's failures (error kinds, attempts, backoff). */
  retryPolicy?: HandlerRetryPolicy;
  /**
   * Checks the decoded payload before the handler runs; the SDK does not check
   * payload types itself (`P` is what the handler assumes, not what arrives).
   * Return the payload to hand to the handler (the same value, or a parsed
   * one: `(p) => schema.parse(p)` with zod and the like); throw to refuse it:
   * the attempt fails for good (non-retryable, kind `PayloadValidationError`,
   * the error's message as its error) and the handler is not called.
   */
  validate?: (payload: unknown) => P;
}

type State = "new" | "running" | "stopping" | "stopped";

export class Worker {
  readonly workerId: string;
  readonly connection: Connection;
  private readonly concurrency: number;
  private readonly explicitJobTypes: string[] | undefined;
  private readonly maxBatchSize: number;
  private readonly heartbeatIntervalMs: number | undefined;
  private readonly shutdownGraceMs: number;
  private readonly cancelGraceMs: number;
  private readonly backoffConfig: { initialMs: number; maximumMs: number; jitter: number };
  private readonly outcomeFlushTimeoutMs: number;
  private readonly creditThreshold: number;
  private readonly handlers = new Map<string, HandlerSpec>();
  private readonly log: Logger;
  private readonly jobLog: Logger;

  private state: State = "new";
  private stopRequested = false;
  private forceStop = false;
  private stopWaiters: (() => void)[] = [];
  private forceWaiters: (() => void)[] = [];
  private stopped!: Promise<void>;
  private markStopped!: () => void;
  private fatal: Error | undefined;
  private readonly running = new Map<string, Attempt>();
  private outstandingCredit = 0;
  private call: grpc.ClientDuplexStream<AcquireJobsRequest, AcquireJobsResponse> | undefined;
  private writable = false;
  private creditTimer: NodeJS.Timeout | undefined;
  private coordinatorDraining = false;
  private connected = false;
  private disconnectedAt: number | undefined;
  private disconnectedReason = "";
  private acceptedHeartbeatMs = 0;
  private stub!: WorkerServiceClient;
  private children!: Client;
  private reporter!: OutcomeReporter;
  private link: StreamLink | undefined;
  private heartbeater!: Heartbeater;
  private streamLoop: Promise<void> | undefined;
  private reconnectTimer: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  /** Set by run() with its signal handlers: the worker may end the process (see shutdown). */
  private ownsProcess = false;
  /** Handlers that did not stop were handed back: the process exits once stopped. */
  private exitNow = false;

  constructor(options: WorkerOptions = {}) {
    const concurrency = options.concurrency ?? 100;
    const maxBatchSize = options.maxBatchSize ?? 100;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError("concurrency must be at least 1");
    if (!Number.isInteger(maxBatchSize) || maxBatchSize < 1) throw new RangeError("maxBatchSize must be at least 1");
    this.connection = new Connection(options);
    this.concurrency = concurrency;
    this.maxBatchSize = maxBatchSize;
    this.workerId = options.workerId ?? `${os.hostname()}-${process.pid}-${crypto.randomBytes(4).toString("hex")}`;
    this.explicitJobTypes = options.jobTypes ? [...options.jobTypes] : undefined;
    this.heartbeatIntervalMs = options.heartbeatIntervalMs;
    this.shutdownGraceMs = options.shutdownGraceMs ?? 30_000;
    this.cancelGraceMs = options.cancelGraceMs ?? 5_000;
    this.backoffConfig = {
      initialMs: options.reconnectInitialBackoffMs ?? 100,
      maximumMs: options.reconnectMaxBackoffMs ?? 10_000,
      jitter: 0.5,
    };
    this.outcomeFlushTimeoutMs = options.outcomeFlushTimeoutMs ?? Math.max(this.shutdownGraceMs, 1_000);
    this.creditThreshold = Math.max(1, Math.floor(concurrency / 4));
    this.log = rootLogger("worker_sdk.worker", options.logSink);
    this.jobLog = rootLogger("worker_sdk.job", options.logSink);
  }

  // -- registration ------------------------------------------------------------------------

  /**
   * Register `fn` as the handler of `jobType`: `(payload, ctx) => result`.
   * The payload is decoded (JSON parsed; bytes as a Buffer); the returned
   * value becomes the job's result (JSON; a Uint8Array as bytes). A thrown
   * error fails the attempt (NonRetryableError: for good; RetryAfterError:
   * retry at its time). Returns the worker, for chaining.
   */
  handler<P = any, R = unknown>(
    jobType: string,
    fn: (payload: P, ctx: JobContext<P>) => Promise<R> | R,
    options: HandlerOptions<P> = {},
  ): this {
    if (this.state !== "new") throw new Error("handlers must be registered before the worker starts");
    if (this.handlers.has(jobType)) throw new Error(`a handler for job type '${jobType}' is already registered`);
    this.handlers.set(jobType, {
      jobType,
      fn: fn as HandlerFn,
      retryPolicy: options.retryPolicy,
      validate: options.validate,
    });
    return this;
  }

  get jobTypes(): string[] {
    return this.explicitJobTypes ?? [...this.handlers.keys()];
  }

  /** Handlers running now. */
  get inFlight(): number {
    return this.running.size;
  }

  get isRunning(): boolean {
    return this.state === "running" || this.state === "stopping";
  }

  // -- lifecycle ---------------------------------------------------------------------------

  /**
   * Run until SIGTERM/SIGINT or shutdown(). The first signal drains (see the
   * module's comment); a second skips the rest of the grace. Rejects with a
   * fatal error (e.g. a refused credential) after shutting down.
   */
  async run(options: { handleSignals?: boolean } = {}): Promise<void> {
    const handleSignals = options.handleSignals ?? true;
    const onSignal = (signal: NodeJS.Signals) => this.onSignal(signal);
    if (handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
      this.ownsProcess = true;
    }
    try {
      await this.start();
      await new Promise<void>((resolve) => (this.stopRequested ? resolve() : this.stopWaiters.push(resolve)));
      await this.shutdownSequence();
    } finally {
      if (handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
    if (this.exitNow) {
      // Handlers still run (deaf to ctx.signal) after their jobs were handed back:
      // nothing of theirs may run on.
      process.exit(this.fatal !== undefined ? 1 : 0);
    }
    if (this.fatal !== undefined) throw this.fatal;
  }

  /** Drain and stop; resolves once stopped. Idempotent. Do not await it inside one of this worker's handlers. */
  async shutdown(): Promise<void> {
    if (this.state === "new") {
      this.state = "stopped";
      return;
    }
    this.requestStop();
    await this.stopped;
  }

  private onSignal(signal: NodeJS.Signals): void {
    if (this.stopRequested) {
      this.log.warning(`${signal} again: skipping the rest of the shutdown grace`);
      this.forceStop = true;
      for (const w of this.forceWaiters.splice(0)) w();
      return;
    }
    this.log.info(`${signal} received: draining`);
    this.requestStop();
  }

  private requestStop(): void {
    if (this.stopRequested) return;
    this.stopRequested = true;
    for (const w of this.stopWaiters.splice(0)) w();
    this.reconnectTimer?.resolve();
  }

  private setFatal(error: Error, what: string): void {
    if (this.fatal === undefined) {
      this.fatal = error;
      this.log.error(`${what}: ${error.message}; stopping the worker`);
    }
    this.requestStop();
  }

  private async start(): Promise<void> {
    if (this.state === "stopped") return;
    if (this.state !== "new") throw new Error("a Worker runs once; create a new one");
    if (this.handlers.size === 0) throw new Error("register at least one handler before starting the worker");
    const missing = this.jobTypes.filter((t) => !this.handlers.has(t));
    if (missing.length > 0) throw new Error(`no handler registered for job type(s): ${missing.join(", ")}`);
    this.state = "running";
    this.stopped = new Promise((resolve) => (this.markStopped = resolve));
    const c = this.connection;
    this.stub = new WorkerServiceClient(c.target, c.credentials, c.channelOptions);
    // Child jobs (ctx.enqueue) go over the worker's channel with its credential.
    this.children = new Client(c, this.stub.getChannel() as grpc.Channel);
    this.reporter = new OutcomeReporter(this.stub, () => c.metadata(), rootLogger("worker_sdk.outcomes", undefined), {
      ...DEFAULT_REPORTER,
      batchSize: Math.max(100, Math.min(this.maxBatchSize, 500)),
    });
    this.heartbeater = new Heartbeater(
      this.stub,
      this.workerId,
      () => this.heldLeases(),
      (ref, status) => this.onLeaseStatus(ref, status),
      () => this.currentHeartbeatInterval(),
      () => c.metadata(),
      rootLogger("worker_sdk.heartbeat", undefined),
    );
    this.heartbeater.start();
    this.streamLoop = this.runStreams().catch((error: Error) => this.setFatal(error, "stream task failed"));
    this.log.info(
      `worker ${this.workerId} started (workflow-jobs ${VERSION}): coordinator ${c.target}, ` +
        `job types ${this.jobTypes.join(", ")}, ${this.concurrency} slot(s)`,
    );
  }

  private async shutdownSequence(): Promise<void> {
    this.state = "stopping";
    // 1. Stop acquiring, and tell running handlers (ctx.stopping).
    this.closeRequestSide();
    for (const attempt of this.running.values()) attempt.ctx.drain();
    // 2. Wait for running handlers, up to the grace.
    const done = [...this.running.values()].map((a) => a.done);
    if (done.length > 0 && !this.forceStop) {
      this.log.info(`waiting up to ${(this.shutdownGraceMs / 1000).toFixed(1)}s for ${done.length} running job(s)`);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(done),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, this.shutdownGraceMs))),
        new Promise<void>((resolve) => this.forceWaiters.push(resolve)),
      ]);
      clearTimeout(timer);
    }
    // 3. Hand back what still runs, once its handler can no longer act.
    await this.handBackRunning();
    // 4. Flush outcomes.
    await this.reporter.flush(this.outcomeFlushTimeoutMs);
    // 5. Stop background work and close the channel.
    this.heartbeater.stop();
    this.reporter.close();
    this.call?.cancel();
    await this.streamLoop;
    this.stub.close();
    this.state = "stopped";
    this.log.info(`worker ${this.workerId} stopped`);
    this.markStopped();
  }

  private async handBackRunning(): Promise<void> {
    const still = [...this.running.values()];
    if (still.length === 0) return;
    this.log.warning(`handing back ${still.length} job(s) still running after the shutdown grace`);
    for (const attempt of still) {
      attempt.stoppedByShutdown = true;
      attempt.ctx.abort(CancelReason.WORKER_SHUTDOWN);
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(still.map((a) => a.handlerSettled)),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, 1_000))),
    ]);
    clearTimeout(timer);
    const stuck = still.filter((a) => this.running.has(a.key));
    if (stuck.length === 0) return;
    if (this.ownsProcess) {
      this.log.warning(
        `${stuck.length} handler(s) did not stop (ignoring ctx.signal): handing their jobs back and exiting the process`,
      );
      for (const attempt of stuck) attempt.interrupt(release(`${CancelReason.WORKER_SHUTDOWN}; handler did not stop`));
      this.exitNow = true;
    } else {
      this.log.warning(
        `waiting for ${stuck.length} handler(s) that did not stop (ignoring ctx.signal); ` +
          "their jobs stay leased, heartbeated, until they return",
      );
    }
    await Promise.all(stuck.map((a) => a.done));
  }

  // -- the stream --------------------------------------------------------------------------

  private hello(): AcquireJobsRequest {
    return {
      kind: {
        $case: "hello",
        hello: {
          workerId: this.workerId,
          jobTypes: this.jobTypes,
          slots: this.concurrency,
          hostname: os.hostname(),
          pid: process.pid,
          sdkVersion: `typescript/${VERSION}`,
          maxBatchSize: this.maxBatchSize,
          maxReceiveMessageBytes: this.connection.maxReceiveMessageBytes,
        },
      },
    };
  }

  private async runStreams(): Promise<void> {
    const backoff = new Backoff(this.backoffConfig);
    while (!this.stopRequested) {
      this.outstandingCredit = 0;
      this.coordinatorDraining = false;
      const call = this.stub.acquireJobs(this.connection.metadata());
      this.call = call;
      this.writable = true;
      let accepted = false;
      const ended = await new Promise<{ reason: string; code: number | undefined }>((resolve) => {
        call.on("data", (response: AcquireJobsResponse) => {
          const kind = response.kind;
          if (kind === undefined) return;
          switch (kind.$case) {
            case "jobs":
              this.onJobs(kind.jobs);
              break;
            case "outcomes":
              this.link?.answered(kind.outcomes);
              break;
            case "accepted":
              accepted = true;
              backoff.reset();
              this.onAccepted(kind.accepted, call);
              break;
            case "drain":
              this.onDrain(kind.drain);
              break;
          }
        });
        call.on("error", () => undefined); // the status event below carries it
        call.on("status", (status: grpc.StatusObject) => {
          // Let data already received be handled first.
          setImmediate(() =>
            resolve(
              status.code === grpc.status.OK
                ? { reason: "the coordinator closed the job stream", code: undefined }
                : { reason: `${statusName(status.code)}: ${status.details}`, code: status.code },
            ),
          );
        });
        // Credit goes out once the hello is accepted (a refused hello ends the call with its status).
        call.write(this.hello());
      });
      this.writable = false;
      if (this.link !== undefined) {
        this.link.ended(ended.reason, ended.code);
        this.link = undefined;
        this.reporter.useStream(undefined);
      }
      this.call = undefined;
      this.cancelCreditTimer();
      if (this.stopRequested) return;
      if (
        ended.code !== undefined &&
        FATAL_STREAM_CODES.has(ended.code) &&
        !(accepted && ended.code === grpc.status.INVALID_ARGUMENT)
      ) {
        throw new WorkflowJobsError(ended.reason, ended.code, statusName(ended.code));
      }
      this.onDisconnected(ended.reason);
      const delay = backoff.nextDelay();
      this.log.debug(`next connection attempt in ${(delay / 1000).toFixed(2)}s`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delay);
        this.reconnectTimer = {
          timer,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        };
      });
      this.reconnectTimer = undefined;
    }
  }

  private send(request: AcquireJobsRequest): void {
    if (this.call !== undefined && this.writable) this.call.write(request);
  }

  private onAccepted(accepted: WorkerAccepted, call: grpc.ClientDuplexStream<AcquireJobsRequest, AcquireJobsResponse>): void {
    if (accepted.outcomesOnStream) {
      // Outcomes go on this stream, each batch with the credit it frees.
      this.link = new StreamLink(
        (request) => {
          if (this.call === call && this.writable) call.write(request);
        },
        () => this.takeCredit(),
      );
      this.reporter.useStream(this.link);
    }
    this.acceptedHeartbeatMs = accepted.heartbeatIntervalMs;
    const coordinator = accepted.coordinatorId || "(unnamed)";
    const target = this.connection.target;
    if (this.disconnectedAt === undefined) {
      this.log.info(`connected to coordinator ${coordinator} at ${target} as worker ${this.workerId}`);
    } else {
      this.log.info(
        `reconnected to coordinator ${coordinator} at ${target} after ${((Date.now() - this.disconnectedAt) / 1000).toFixed(1)}s`,
      );
    }
    this.connected = true;
    this.disconnectedAt = undefined;
    this.disconnectedReason = "";
    this.heartbeater.reschedule();
    this.grantCredit();
  }

  /** Log a change of connection state once; repeated failures only at DEBUG. */
  private onDisconnected(reason: string): void {
    const target = this.connection.target;
    if (this.connected) {
      this.log.warning(
        `lost the connection to the coordinator at ${target} (${reason}); reconnecting, running jobs carry on`,
      );
      this.disconnectedAt = Date.now();
    } else if (reason !== this.disconnectedReason) {
      this.log.warning(`cannot reach the coordinator at ${target} (${reason}); retrying`);
    } else {
      this.log.debug(`still cannot reach the coordinator at ${target} (${reason})`);
    }
    this.connected = false;
    this.disconnectedReason = reason;
  }

  private onDrain(drain: DrainRequested): void {
    // A drained coordinator stops pushing; no more credit on this stream.
    this.log.info(`coordinator requested drain: ${drain.reason || "(no reason)"}`);
    this.coordinatorDraining = true;
    this.cancelCreditTimer();
  }

  private closeRequestSide(): void {
    this.cancelCreditTimer();
    // Batches already sent are answered on the stream; new ones take ReportOutcomes.
    if (this.link !== undefined) this.link.sending = false;
    if (this.call !== undefined && this.writable) {
      this.writable = false;
      this.call.end();
    }
  }

  // -- credit ------------------------------------------------------------------------------

  private freeCredit(): number {
    return this.concurrency - this.running.size - this.outstandingCredit;
  }

  private canGrant(): boolean {
    return this.call !== undefined && this.writable && !this.stopRequested && !this.coordinatorDraining;
  }

  private creditDue(): number {
    const credits = this.freeCredit();
    if (credits <= 0 || !this.canGrant()) return 0;
    if (credits >= this.creditThreshold || this.outstandingCredit < this.creditThreshold) return credits;
    return 0;
  }

  private grantCredit(): void {
    this.cancelCreditTimer();
    const credits = this.creditDue();
    if (credits > 0) {
      this.send({ kind: { $case: "credit", credit: { credits } } });
      this.outstandingCredit += credits;
    }
  }

  /** The free slots due, counted as granted: they ride on a batch of outcomes. */
  private takeCredit(): number {
    this.cancelCreditTimer();
    const credits = this.creditDue();
    this.outstandingCredit += credits;
    return credits;
  }

  private slotFreed(): void {
    if (!this.canGrant()) return;
    if (this.reporter.carriesCredit) {
      this.creditTimer ??= setTimeout(() => this.grantCredit(), 10);
      return;
    }
    if (this.freeCredit() >= this.creditThreshold) {
      this.grantCredit();
    } else if (this.creditTimer === undefined && this.outstandingCredit < this.creditThreshold) {
      this.creditTimer = setTimeout(() => this.grantCredit(), 2);
    }
  }

  private cancelCreditTimer(): void {
    if (this.creditTimer !== undefined) {
      clearTimeout(this.creditTimer);
      this.creditTimer = undefined;
    }
  }

  // -- jobs --------------------------------------------------------------------------------

  private onJobs(batch: JobBatch): void {
    const now = Date.now();
    for (const leased of batch.jobs) {
      this.outstandingCredit = Math.max(0, this.outstandingCredit - 1);
      const job = leased.job;
      if (job === undefined) continue;
      const key = `${job.id}\u0000${leased.leaseToken}`;
      const expire = leased.leaseExpireTime;
      const span = startExecution(job, this.workerId);
      const spanContext = span.spanContext();
      const ctx = new JobContext({
        job,
        payload: undefined,
        leaseToken: leased.leaseToken,
        leaseExpireTime: expire,
        workerId: this.workerId,
        span,
        logger: this.jobLog.child("worker_sdk.job", {
          job_id: job.id,
          job_type: job.jobType,
          tenant_id: job.tenantId,
          attempt: job.attempt,
          trace_id: spanContext.traceId,
          span_id: spanContext.spanId,
        }),
        client: this.children,
        onHeartbeat: () => this.heartbeater.trigger(),
      });
      const attempt: Attempt = {
        key,
        leased,
        ctx,
        handler: this.handlers.get(job.jobType),
        leaseDurationMs: expire ? expire.getTime() - now : undefined,
        interrupt: () => undefined,
        cancelRequested: false,
        handedBack: false,
        timers: [],
      };
      if (this.stopRequested) {
        span.end();
        this.submit(attempt, release(CancelReason.WORKER_SHUTDOWN));
        continue;
      }
      if (this.running.has(key)) {
        this.log.warning(`job ${job.id} pushed twice with the same lease; ignored`);
        span.end();
        continue;
      }
      this.running.set(key, attempt);
      attempt.done = runAttempt(attempt, this.workerId, span).then((outcome) => {
        this.finish(attempt, outcome);
        return outcome;
      });
    }
    if (this.outstandingCredit < this.creditThreshold && this.freeCredit() > 0) this.slotFreed();
    if (this.heartbeatIntervalMs === undefined) this.heartbeater.reschedule();
    if (this.running.size > this.concurrency) {
      this.log.warning(
        `coordinator pushed more jobs than granted credit: ${this.running.size} running, ${this.concurrency} slots`,
      );
    }
  }

  private finish(attempt: Attempt, outcome: Outcome): void {
    this.running.delete(attempt.key);
    if (attempt.handedBack) return;
    if (attempt.ctx.leaseLost) {
      attempt.ctx.logger.warning(`job ${attempt.ctx.jobId} finished after its lease was lost; outcome not reported`);
    } else {
      this.submit(attempt, outcome);
    }
    this.slotFreed();
  }

  private submit(attempt: Attempt, outcome: Outcome): void {
    const job = attempt.leased.job!;
    this.reporter.submit(jobOutcome(job.id, attempt.leased.leaseToken, outcome, attempt.ctx.pushBackMs));
  }

  // -- heartbeats --------------------------------------------------------------------------

  private heldLeases(): LeaseRef[] {
    const leases: LeaseRef[] = [];
    for (const attempt of this.running.values()) {
      if (!attempt.ctx.leaseLost) leases.push({ jobId: attempt.leased.job!.id, leaseToken: attempt.leased.leaseToken });
    }
    leases.push(...this.reporter.unreported());
    return leases;
  }

  private currentHeartbeatInterval(): number {
    if (this.heartbeatIntervalMs) return this.heartbeatIntervalMs;
    const base = this.acceptedHeartbeatMs > 0 ? this.acceptedHeartbeatMs : 10_000;
    let shortest = Infinity;
    for (const attempt of this.running.values()) {
      if (attempt.leaseDurationMs && attempt.leaseDurationMs < shortest) shortest = attempt.leaseDurationMs;
    }
    return shortest === Infinity ? base : Math.max(250, Math.min(base, shortest / 3));
  }

  private onLeaseStatus(ref: LeaseRef, status: LeaseStatus): void {
    const attempt = this.running.get(`${ref.jobId}\u0000${ref.leaseToken}`);
    if (attempt === undefined) return;
    const ctx = attempt.ctx;
    if (status.state === LeaseState.LEASE_STATE_EXTENDED) {
      if (status.leaseExpireTime !== undefined) ctx.leaseExpireTime = status.leaseExpireTime;
    } else if (status.state === LeaseState.LEASE_STATE_LOST) {
      if (!ctx.isCancelled()) ctx.logger.warning(`lease of job ${ctx.jobId} lost`);
      ctx.span.addEvent("lease lost");
      ctx.abort(CancelReason.LEASE_LOST);
    } else if (status.state === LeaseState.LEASE_STATE_CANCEL_REQUESTED) {
      if (!attempt.cancelRequested) {
        ctx.logger.info(`cancel requested for job ${ctx.jobId}`);
        ctx.span.addEvent("cancel requested");
        attempt.cancelRequested = true;
        ctx.abort(CancelReason.CANCEL_REQUESTED);
        attempt.timers.push(
          setTimeout(
            () =>
              attempt.interrupt(
                failure("JobCancelledError: cancel requested", "JobCancelledError", { nonRetryable: true }),
              ),
            this.cancelGraceMs,
          ),
        );
      }
    }
  }
}
