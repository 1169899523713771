/**
 * Batched outcome reporting, on the job stream or through ReportOutcomes
 * (docs/protocol.md, "Outcomes"; the Python SDK's worker_sdk/_outcomes.py).
 *
 * Finished jobs queue here; a flusher sends them at once when `batchSize`
 * are pending, otherwise after at most `lingerMs`. While the stream is open
 * and its coordinator takes outcomes on it, a batch goes as one OutcomeBatch
 * carrying the credit its jobs free, answered by OutcomeAnswers; otherwise it
 * goes as a ReportOutcomes call. A batch with no answer (the call failed with
 * a retryable code, or the stream ended first) is sent again with capped,
 * jittered backoff, and so are outcomes answered with a transient code:
 * resending is safe, the coordinator records an outcome once per lease token
 * (a resend answers accepted with already_recorded). INTERNAL/UNKNOWN splits
 * a batch in halves; a batch refused as a whole goes one outcome at a time.
 * An outcome still unreported `giveUpAfterMs` after its first send is given
 * up with an ERROR line (its lease expires and the job is retried).
 */
import type * as grpc from "@grpc/grpc-js";
import { Backoff, RETRYABLE_CODES, RETRYABLE_NAMES } from "./backoff";
import { statusName, unary } from "./client";
import type {
  AcquireJobsRequest,
  JobOutcome,
  LeaseRef,
  OutcomeAnswers,
  OutcomeResult,
  WorkerServiceClient,
} from "./gen/workflowjobs/v1/worker_service";
import type { Logger } from "./log";

const SPLIT_CODES = new Set([13, 2]); // INTERNAL, UNKNOWN
const INVALID_ARGUMENT = 3;
const UNAVAILABLE = 14;
const DEADLINE_EXCEEDED = 4;

class ReportFailed extends Error {
  constructor(
    readonly code: number,
    readonly details: string,
    readonly unaryOnly = false,
  ) {
    super(`${statusName(code)}: ${details}`);
  }
}

/** One open job stream that takes outcomes. */
export class StreamLink {
  private nextId = 1n;
  private readonly waiting = new Map<bigint, { resolve: (r: OutcomeResult[]) => void; reject: (e: Error) => void }>();
  /** False once the stream's request side is closed: new batches take ReportOutcomes. */
  sending = true;

  constructor(
    private readonly send: (request: AcquireJobsRequest) => void,
    private readonly takeCredit: () => number,
  ) {}

  submit(batch: JobOutcome[]): Promise<OutcomeResult[]> {
    const batchId = this.nextId++;
    const answered = new Promise<OutcomeResult[]>((resolve, reject) => this.waiting.set(batchId, { resolve, reject }));
    this.send({ kind: { $case: "outcomes", outcomes: { batchId, outcomes: batch, credits: this.takeCredit() } } });
    return answered;
  }

  answered(answers: OutcomeAnswers): void {
    const waiter = this.waiting.get(answers.batchId);
    if (waiter !== undefined) {
      this.waiting.delete(answers.batchId);
      waiter.resolve(answers.results);
    }
  }

  /** The stream ended: unanswered batches are sent again (by ReportOutcomes when it ended refusing a message). */
  ended(reason: string, code: number | undefined): void {
    this.sending = false;
    const waiting = [...this.waiting.values()];
    this.waiting.clear();
    for (const waiter of waiting) {
      waiter.reject(
        new ReportFailed(
          UNAVAILABLE,
          `the job stream ended before the outcomes were answered (${reason})`,
          code === INVALID_ARGUMENT,
        ),
      );
    }
  }
}

export interface ReporterConfig {
  batchSize: number;
  lingerMs: number;
  maxInFlight: number;
  rpcTimeoutMs: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  giveUpAfterMs: number;
}

export const DEFAULT_REPORTER: ReporterConfig = {
  batchSize: 100,
  lingerMs: 2,
  maxInFlight: 4,
  rpcTimeoutMs: 15_000,
  initialBackoffMs: 50,
  maxBackoffMs: 5_000,
  giveUpAfterMs: 300_000,
};

function sleep(ms: number, abort: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (abort.aborted) return resolve(true);
    const timer = setTimeout(() => {
      abort.removeEventListener("abort", onAbort);
      resolve(false);
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      resolve(true);
    };
    abort.addEventListener("abort", onAbort, { once: true });
  });
}

export class OutcomeReporter {
  private pending: JobOutcome[] = [];
  private readonly inFlight = new Set<JobOutcome[]>();
  private link: StreamLink | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sends = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly giveUp = new AbortController();
  /** Reports (stream batches or ReportOutcomes calls) answered so far. */
  reportsSent = 0;

  constructor(
    private readonly stub: WorkerServiceClient,
    private readonly metadata: () => grpc.Metadata,
    private readonly logger: Logger,
    private readonly config: ReporterConfig = DEFAULT_REPORTER,
  ) {}

  useStream(link: StreamLink | undefined): void {
    this.link = link;
  }

  /** True when the next batch goes on the stream and will carry the free credit. */
  get carriesCredit(): boolean {
    return this.link !== undefined && this.link.sending && this.pending.length > 0;
  }

  submit(outcome: JobOutcome): void {
    this.pending.push(outcome);
    this.schedule();
  }

  /** Leases whose outcome is queued or in flight (they still need heartbeats). */
  unreported(): LeaseRef[] {
    const refs: LeaseRef[] = this.pending.map((o) => ({ jobId: o.jobId, leaseToken: o.leaseToken }));
    for (const batch of this.inFlight) for (const o of batch) refs.push({ jobId: o.jobId, leaseToken: o.leaseToken });
    return refs;
  }

  get backlog(): number {
    let n = this.pending.length;
    for (const batch of this.inFlight) n += batch.length;
    return n;
  }

  /** Wait until every queued outcome was answered; on `timeoutMs`, give up (ERROR line) and return false. */
  async flush(timeoutMs: number): Promise<boolean> {
    this.drainPending();
    if (this.backlog === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true)));
    const expired = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const done = await Promise.race([idle, expired]);
    clearTimeout(timer);
    if (!done) {
      const lost = this.unreported().map((r) => r.jobId);
      this.giveUp.abort();
      this.logger.error(
        `gave up reporting ${lost.length} outcome(s) at shutdown; their leases will expire and ` +
          `the coordinator will retry them: ${lost.join(", ")}`,
      );
    }
    return done;
  }

  close(): void {
    this.giveUp.abort();
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.pending.length >= this.config.batchSize) {
      this.drainPending();
    } else if (this.timer === undefined) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.drainPending();
      }, this.config.lingerMs);
    }
  }

  private drainPending(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    while (this.pending.length > 0 && this.sends < this.config.maxInFlight) {
      const batch = this.pending.splice(0, this.config.batchSize);
      this.inFlight.add(batch);
      this.sends += 1;
      void this.send(batch, Date.now(), false)
        .catch((error: Error) => {
          // A bug here must not take the process down: the leases expire and the jobs are retried.
          const jobs = batch.map((o) => o.jobId).join(", ");
          this.logger.error(`reporting outcome(s) of job(s) ${jobs} failed: ${error.stack ?? error}`);
        })
        .finally(() => {
          this.inFlight.delete(batch);
          this.sends -= 1;
          if (this.pending.length > 0) this.drainPending();
          this.notifyIdle();
        });
    }
  }

  private notifyIdle(): void {
    if (this.backlog === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private async report(batch: JobOutcome[], unaryOnly: boolean): Promise<OutcomeResult[]> {
    const link = this.link;
    if (link !== undefined && link.sending && !unaryOnly) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new ReportFailed(DEADLINE_EXCEEDED, `no answer on the job stream within ${this.config.rpcTimeoutMs / 1000}s`)),
          this.config.rpcTimeoutMs,
        );
      });
      try {
        return await Promise.race([link.submit(batch), timeout]);
      } finally {
        clearTimeout(timer);
      }
    }
    try {
      const response = await unary(
        this.stub.reportOutcomes.bind(this.stub),
        { outcomes: batch },
        this.metadata(),
        this.config.rpcTimeoutMs,
      );
      return response.results;
    } catch (error) {
      const e = error as { code: number; message: string };
      throw new ReportFailed(e.code, e.message.replace(/^[A-Z_]+: /, ""));
    }
  }

  private async send(batch: JobOutcome[], firstSent: number, unaryOnly: boolean): Promise<void> {
    const backoff = new Backoff({
      initialMs: this.config.initialBackoffMs,
      maximumMs: this.config.maxBackoffMs,
      jitter: 0.5,
    });
    let current = batch;
    for (;;) {
      let results: OutcomeResult[];
      try {
        results = await this.report(current, unaryOnly);
      } catch (error) {
        if (!(error instanceof ReportFailed)) throw error;
        unaryOnly ||= error.unaryOnly;
        if (SPLIT_CODES.has(error.code) && current.length > 1) {
          this.logger.warning(
            `reporting ${current.length} outcome(s) failed (${statusName(error.code)}: ${error.details}); sending them in two halves`,
          );
          const middle = Math.floor(current.length / 2);
          this.inFlight.delete(current);
          await Promise.all([
            this.tracked(current.slice(0, middle), firstSent, unaryOnly),
            this.tracked(current.slice(middle), firstSent, unaryOnly),
          ]);
          return;
        }
        if (RETRYABLE_CODES.has(error.code) && !this.giveUp.signal.aborted) {
          if (await this.retryLater(current, firstSent, backoff, statusName(error.code), error.details)) return;
          continue;
        }
        if (current.length > 1 && !RETRYABLE_CODES.has(error.code)) {
          for (const outcome of current) await this.send([outcome], firstSent, unaryOnly);
          return;
        }
        this.logger.error(
          `coordinator rejected outcome(s) for job(s) ${current.map((o) => o.jobId).join(", ")}: ` +
            `${statusName(error.code)}: ${error.details}`,
        );
        return;
      }
      this.reportsSent += 1;
      const again: JobOutcome[] = [];
      let last: OutcomeResult | undefined;
      if (results.length !== current.length) {
        this.logger.warning(`coordinator answered ${results.length} result(s) for ${current.length} outcome(s)`);
      }
      current.forEach((outcome, i) => {
        const result = results[i];
        if (result === undefined) return;
        if (result.accepted) {
          // Recorded, with something changed (a push-back shortened).
          if (result.note) this.logger.warning(`outcome of job ${outcome.jobId} recorded: ${result.note}`);
          return;
        }
        if (RETRYABLE_NAMES.has(result.errorCode)) {
          again.push(outcome);
          last = result;
        } else {
          this.logger.warning(`outcome of job ${outcome.jobId} not recorded: ${result.errorCode}: ${result.errorMessage}`);
        }
      });
      if (again.length === 0 || last === undefined) return;
      // Only the outcomes answered with a transient code go again (kept in the in-flight set).
      current.splice(0, current.length, ...again);
      if (this.giveUp.signal.aborted) return;
      if (await this.retryLater(current, firstSent, backoff, last.errorCode, last.errorMessage)) return;
    }
  }

  private async tracked(half: JobOutcome[], firstSent: number, unaryOnly: boolean): Promise<void> {
    this.inFlight.add(half);
    try {
      await this.send(half, firstSent, unaryOnly);
    } finally {
      this.inFlight.delete(half);
    }
  }

  /** Wait before sending `batch` again; true when it is given up instead. */
  private async retryLater(batch: JobOutcome[], firstSent: number, backoff: Backoff, code: string, details: string): Promise<boolean> {
    const delay = backoff.nextDelay();
    const waited = Date.now() - firstSent;
    if (waited + delay > this.config.giveUpAfterMs) {
      this.logger.error(
        `gave up reporting the outcome of job(s) ${batch.map((o) => o.jobId).join(", ")} after ` +
          `${(waited / 1000).toFixed(1)}s of failures (last: ${code}: ${details}); their leases will ` +
          "expire and the coordinator will retry them",
      );
      return true;
    }
    this.logger.warning(`reporting ${batch.length} outcome(s) failed (${code}: ${details}); retrying in ${(delay / 1000).toFixed(2)}s`);
    return sleep(delay, this.giveUp.signal);
  }
}
