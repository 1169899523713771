/**
 * A small client of JobSchedulerService: enqueue, enqueue a batch, read a job,
 * wait for it to finish, watch job events.
 *
 * ```ts
 * const client = new Client({ target: "127.0.0.1:50051" });
 * const job = await client.enqueue("hello", { name: "Ada" }, { tenantId: "default" });
 * const done = await client.waitForJob(job.id);
 * ```
 */
import * as grpc from "@grpc/grpc-js";
import { type Context, context as otelContext } from "@opentelemetry/api";
import { decodePayload, encodePayload } from "./codec";
import { WorkflowJobsError } from "./errors";
import {
  JobCategory,
  JobSpec,
  JobStatus,
  type Job,
  type RetryPolicy,
  type WorkflowRef,
} from "./gen/workflowjobs/v1/job";
import {
  type EnqueueResult,
  type JobEvent,
  type JobEventFilter,
  JobSchedulerServiceClient,
} from "./gen/workflowjobs/v1/scheduler_service";
import { Connection, type ConnectionOptions } from "./transport";
import { withEnqueueSpan } from "./tracing";

export { JobCategory, JobStatus };
export type { Job, JobEvent, JobEventFilter, EnqueueResult, WorkflowRef, RetryPolicy };

/** What `enqueue` takes besides the job type and payload; every field is optional. */
export interface EnqueueOptions {
  tenantId?: string;
  workflow?: Partial<WorkflowRef>;
  category?: JobCategory;
  priority?: number;
  /** Run no sooner than this (a Date, or milliseconds from now). */
  due?: Date | number;
  retryPolicy?: Partial<RetryPolicy>;
  /** Execution timeout and lease length (heartbeat timeout), in milliseconds. */
  executionTimeoutMs?: number;
  heartbeatTimeoutMs?: number;
  idempotencyKey?: string;
  concurrencyKey?: string;
  orderingKey?: string;
  parentJobId?: string;
  /** The payload's content type when `payload` is bytes. */
  contentType?: string;
}

/** One job of `enqueueBatch`. */
export interface BatchItem extends EnqueueOptions {
  jobType: string;
  payload?: unknown;
}

export class CallError extends WorkflowJobsError {}

function duration(ms: number | undefined) {
  if (ms === undefined) return undefined;
  const seconds = Math.floor(ms / 1000);
  return { seconds: BigInt(seconds), nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

/** The JobSpec of one job (exported for ctx.enqueue). */
export function jobSpec(jobType: string, payload: unknown, options: EnqueueOptions = {}): JobSpec {
  const encoded = encodePayload(payload);
  if (options.contentType !== undefined && payload instanceof Uint8Array) encoded.contentType = options.contentType;
  const due = options.due === undefined ? undefined : options.due instanceof Date ? options.due : new Date(Date.now() + options.due);
  return JobSpec.fromPartial({
    jobType,
    tenantId: options.tenantId ?? "",
    workflow: options.workflow,
    payload: encoded,
    category: options.category ?? JobCategory.JOB_CATEGORY_UNSPECIFIED,
    priority: options.priority ?? 0,
    dueTime: due,
    retryPolicy: options.retryPolicy,
    executionTimeout: duration(options.executionTimeoutMs),
    heartbeatTimeout: duration(options.heartbeatTimeoutMs),
    idempotencyKey: options.idempotencyKey ?? "",
    concurrencyKey: options.concurrencyKey ?? "",
    parentJobId: options.parentJobId ?? "",
    orderingKey: options.orderingKey ?? "",
  });
}

const STATUS_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(grpc.status).filter(([, v]) => typeof v === "number").map(([k, v]) => [v, k]),
);

/** The gRPC status name of a numeric code ("UNAVAILABLE"). */
export function statusName(code: number): string {
  return STATUS_NAMES[code] ?? String(code);
}

function callError(error: grpc.ServiceError): CallError {
  return new CallError(`${statusName(error.code)}: ${error.details}`, error.code, statusName(error.code));
}

/** Promise of a unary call made the callback way. */
export function unary<Req, Res>(
  call: (req: Req, md: grpc.Metadata, options: Partial<grpc.CallOptions>, cb: (e: grpc.ServiceError | null, r: Res) => void) => unknown,
  request: Req,
  metadata: grpc.Metadata,
  timeoutMs?: number,
): Promise<Res> {
  const options: Partial<grpc.CallOptions> = timeoutMs !== undefined ? { deadline: new Date(Date.now() + timeoutMs) } : {};
  return new Promise((resolve, reject) => {
    call(request, metadata, options, (error, response) => (error ? reject(callError(error)) : resolve(response)));
  });
}

export interface ClientOptions extends ConnectionOptions {
  /** Deadline of each unary call, in milliseconds (default: none). */
  timeoutMs?: number;
}

export class Client {
  readonly connection: Connection;
  private readonly stub: JobSchedulerServiceClient;
  private readonly timeoutMs: number | undefined;
  private readonly owned: boolean;

  /** `channel`: share another client's channel (the worker's, for ctx.enqueue). */
  constructor(options: ClientOptions | Connection = {}, channel?: grpc.Channel | grpc.ChannelInterface) {
    this.connection = options instanceof Connection ? options : new Connection(options);
    this.timeoutMs = options instanceof Connection ? undefined : options.timeoutMs;
    this.owned = channel === undefined;
    this.stub = new JobSchedulerServiceClient(this.connection.target, this.connection.credentials, {
      ...this.connection.channelOptions,
      ...(channel ? { channelOverride: channel } : {}),
    });
  }

  /** Close the channel (not a shared one). */
  close(): void {
    if (this.owned) this.stub.close();
  }

  /** Enqueue one job; returns the stored job (an existing one for a repeated idempotency key). */
  async enqueue(jobType: string, payload?: unknown, options: EnqueueOptions = {}, parent?: Context): Promise<Job> {
    return (await this.enqueueSpec(jobSpec(jobType, payload, options), parent)).job;
  }

  /** Enqueue a ready JobSpec (its traceparent, when empty, is the enqueue span's). */
  async enqueueSpec(spec: JobSpec, parent: Context = otelContext.active()): Promise<{ job: Job; deduplicated: boolean }> {
    return withEnqueueSpan(`enqueue ${spec.jobType}`, { "wfjobs.tenant_id": spec.tenantId }, parent, async (carrier) => {
      if (!spec.traceparent) Object.assign(spec, carrier);
      const response = await unary(
        this.stub.enqueue.bind(this.stub),
        { job: spec, inline: undefined },
        this.connection.metadata(),
        this.timeoutMs,
      );
      return { job: response.job as Job, deduplicated: response.deduplicated };
    });
  }

  /** Enqueue several jobs atomically: all or none. Results in request order. */
  async enqueueBatch(items: BatchItem[], parent: Context = otelContext.active()): Promise<EnqueueResult[]> {
    const specs = items.map((item) => jobSpec(item.jobType, item.payload, item));
    const types = new Set(specs.map((s) => s.jobType));
    const name = types.size === 1 ? `enqueue ${specs[0].jobType}` : "enqueue batch";
    return withEnqueueSpan(name, { "messaging.batch.message_count": specs.length }, parent, async (carrier) => {
      for (const spec of specs) if (!spec.traceparent) Object.assign(spec, carrier);
      const response = await unary(
        this.stub.enqueueBatch.bind(this.stub),
        { jobs: specs },
        this.connection.metadata(),
        this.timeoutMs,
      );
      return response.results;
    });
  }

  /** Read one job (with its attempts when asked). */
  async getJob(jobId: string, options: { attempts?: boolean } = {}): Promise<Job> {
    const response = await unary(
      this.stub.getJob.bind(this.stub),
      { jobId, includeAttempts: options.attempts ?? false },
      this.connection.metadata(),
      this.timeoutMs,
    );
    return response.job as Job;
  }

  /** Wait until the job is COMPLETED, FAULTED or CANCELLED (or `timeoutMs` passes: DEADLINE_EXCEEDED). */
  async waitForJob(jobId: string, options: { timeoutMs?: number } = {}): Promise<Job> {
    const response = await unary(
      this.stub.waitForJob.bind(this.stub),
      { jobId },
      this.connection.metadata(),
      options.timeoutMs,
    );
    return response.job as Job;
  }

  /**
   * Job events matching `filter`, history first (from `after`, or the oldest
   * kept with `fromOldest`), then the live tail; the iterator never ends on
   * its own (break out of the loop, or pass `signal`).
   */
  async *watchEvents(
    filter: Partial<JobEventFilter> = {},
    options: { after?: string; fromOldest?: boolean; signal?: AbortSignal } = {},
  ): AsyncGenerator<JobEvent> {
    const call = this.stub.watchJobEvents(
      {
        filter: { tenantId: "", definitionId: "", instanceId: "", correlationId: "", jobType: "", kinds: [], jobId: "", groupId: "", ...filter },
        after: options.after ?? "",
        fromOldest: options.fromOldest ?? false,
      },
      this.connection.metadata(),
    );
    const abort = () => call.cancel();
    options.signal?.addEventListener("abort", abort, { once: true });
    try {
      for await (const response of call) {
        for (const event of (response as { events: JobEvent[] }).events) yield event;
      }
    } catch (error) {
      const e = error as grpc.ServiceError;
      if (e.code === grpc.status.CANCELLED && (options.signal?.aborted ?? true)) return;
      throw typeof e.code === "number" ? callError(e) : error;
    } finally {
      options.signal?.removeEventListener("abort", abort);
      call.cancel();
    }
  }
}

/** A job's result, decoded (JSON parsed). */
export function resultOf(job: Job): unknown {
  return decodePayload(job.result);
}

/** A job's status name ("COMPLETED"). */
export function statusOf(job: Job): string {
  return JobStatus[job.status].replace("JOB_STATUS_", "");
}
