/**
 * OpenTelemetry: enqueue spans, W3C trace context in JobSpec.traceparent, one
 * span per attempt.
 *
 * The SDK uses @opentelemetry/api only. With no tracer provider registered by
 * the application every span is a no-op, yet the trace context still
 * propagates: a child job enqueued by a handler carries the enqueuer's trace.
 * With a provider registered, an `enqueue <job type>` span (PRODUCER) wraps
 * each enqueue and its context is stored with the job; each attempt is an
 * `execute <job type>` span (CONSUMER) whose parent is that stored context.
 */
import {
  ROOT_CONTEXT,
  type Context,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  context,
  createTraceState,
  isSpanContextValid,
  trace,
} from "@opentelemetry/api";
import type { Job } from "./gen/workflowjobs/v1/job";

const SCOPE = "worker_sdk";
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

export function tracer() {
  return trace.getTracer(SCOPE);
}

/** The context whose span is the remote parent `traceparent` names (ROOT_CONTEXT when it is not valid). */
export function extract(traceparent: string, tracestate = ""): Context {
  const match = TRACEPARENT.exec(traceparent.trim().toLowerCase());
  if (!match || match[1] === "ff") return ROOT_CONTEXT;
  const spanContext: SpanContext = {
    traceId: match[2],
    spanId: match[3],
    traceFlags: parseInt(match[4], 16) & 1,
    isRemote: true,
    traceState: tracestate ? createTraceState(tracestate) : undefined,
  };
  if (!isSpanContextValid(spanContext)) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, spanContext);
}

/** `traceparent` and `tracestate` of a span context (empty when it is not valid). */
export function inject(spanContext: SpanContext | undefined): { traceparent: string; tracestate: string } {
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return { traceparent: "", tracestate: "" };
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, "0");
  return {
    traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`,
    tracestate: spanContext.traceState?.serialize() ?? "",
  };
}

/** Start the `execute <job type>` span of one attempt, child of the job's stored context. */
export function startExecution(job: Job, workerId: string): Span {
  const parent = job.traceparent ? extract(job.traceparent, job.tracestate) : ROOT_CONTEXT;
  const workflow = job.workflow;
  return tracer().startSpan(
    `execute ${job.jobType}`,
    {
      kind: SpanKind.CONSUMER,
      attributes: {
        "messaging.system": "workflow-jobs",
        "wfjobs.job_id": job.id,
        "wfjobs.job_type": job.jobType,
        "wfjobs.attempt": job.attempt,
        "wfjobs.tenant_id": job.tenantId,
        "wfjobs.definition_id": workflow?.definitionId ?? "",
        "wfjobs.definition_version": workflow?.definitionVersion ?? 0,
        "wfjobs.instance_id": workflow?.instanceId ?? "",
        "wfjobs.activity_id": workflow?.activityId ?? "",
        "wfjobs.correlation_id": workflow?.correlationId ?? "",
        "wfjobs.worker_id": workerId,
      },
    },
    parent,
  );
}

/** The outcome on the attempt's span, then end it. */
export function finishExecution(
  span: Span,
  outcome: "completed" | "failed" | "released" | "cancelled",
  failure?: { error: string; errorKind: string; nonRetryable: boolean },
): void {
  span.setAttribute("wfjobs.outcome", outcome);
  if (outcome === "failed" && failure !== undefined) {
    span.setAttribute("error.type", failure.errorKind || "Error");
    span.setAttribute("wfjobs.non_retryable", failure.nonRetryable);
    span.setStatus({ code: SpanStatusCode.ERROR, message: failure.error });
  }
  span.end();
}

/** Run `fn` inside an `enqueue` span (PRODUCER) under `parent`; it gets the span's W3C context. */
export async function withEnqueueSpan<T>(
  name: string,
  attributes: Record<string, string | number>,
  parent: Context,
  fn: (carrier: { traceparent: string; tracestate: string }) => Promise<T>,
): Promise<T> {
  const span = tracer().startSpan(
    name,
    { kind: SpanKind.PRODUCER, attributes: { "messaging.system": "workflow-jobs", ...attributes } },
    parent,
  );
  // A no-op span carries its parent's context: the enqueuer's trace still propagates.
  const carrier = inject(span.spanContext());
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(carrier));
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: String((error as Error)?.message ?? error) });
    throw error;
  } finally {
    span.end();
  }
}
