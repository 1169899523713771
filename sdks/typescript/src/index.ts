/** The TypeScript worker SDK and client of workflow-jobs. */
export { Worker, type WorkerOptions, type HandlerOptions } from "./worker";
export { JobContext, CancelReason, JobCancelledError, CHILD_KEY_PREFIX, type ChildOptions } from "./context";
export {
  Client,
  CallError,
  JobCategory,
  JobStatus,
  resultOf,
  statusOf,
  statusName,
  type BatchItem,
  type ClientOptions,
  type EnqueueOptions,
  type EnqueueResult,
  type Job,
  type JobEvent,
  type JobEventFilter,
  type WorkflowRef,
} from "./client";
export { NonRetryableError, RetryAfterError, ThrottledError, WorkflowJobsError } from "./errors";
export type { HandlerRetryPolicy } from "./execution";
export { encodePayload, decodePayload } from "./codec";
export type { ConnectionOptions, TlsOptions } from "./transport";
export type { LogRecord, LogSink, Level } from "./log";
export { JobEventKind } from "./gen/workflowjobs/v1/scheduler_service";
export { VERSION } from "./version";
