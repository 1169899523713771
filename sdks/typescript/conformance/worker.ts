// The conformance kit's worker for the TypeScript SDK (the contract: tests/conformance/README.md).
// Run: node dist/conformance/worker.js --target HOST:PORT --worker-id ID
//      [--concurrency N] [--shutdown-grace SECONDS] [--record FILE]
import * as fs from "node:fs";
import { parseArgs } from "node:util";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { type JobContext, NonRetryableError, Worker } from "../src/index";

const { values: options } = parseArgs({
  options: {
    target: { type: "string" },
    "worker-id": { type: "string" },
    concurrency: { type: "string", default: "4" },
    "shutdown-grace": { type: "string", default: "5" },
    record: { type: "string", default: "" },
  },
});

// Spans with real ids, so the trace handler can say who its parent is.
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
trace.setGlobalTracerProvider(new BasicTracerProvider());

const worker = new Worker({
  target: options.target,
  workerId: options["worker-id"],
  concurrency: Number(options.concurrency),
  shutdownGraceMs: Number(options["shutdown-grace"]) * 1000,
});

function record(event: string, ctx: JobContext<unknown>): void {
  if (options.record) fs.appendFileSync(options.record, `${event} ${ctx.jobId} ${ctx.attempt} ${Date.now()}\n`);
}

class FlakyError extends Error {}

/** Sleep, ending early when the job's signal is aborted. */
function sleep(ctx: JobContext<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    if (ctx.signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      ctx.signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    ctx.signal.addEventListener("abort", done);
  });
}

worker.handler("echo", async (payload, ctx) => {
  record("start", ctx);
  return payload;
});

worker.handler<{ fail_times: number }>("flaky", async (payload, ctx) => {
  record("start", ctx);
  if (ctx.attempt <= payload.fail_times) throw new FlakyError(`attempt ${ctx.attempt} fails`);
  return { attempt: ctx.attempt };
});

worker.handler<{ ms: number; first_attempt_ms?: number }>("sleep", async (payload, ctx) => {
  record("start", ctx);
  const ms = ctx.attempt === 1 ? payload.first_attempt_ms ?? payload.ms : payload.ms;
  await new Promise((resolve) => setTimeout(resolve, ms)); // deaf to ctx.signal: a handler that does not stop
  record("end", ctx);
  return { slept_ms: ms };
});

worker.handler<{ ms: number; first_attempt_ms?: number }>("blocking", async (payload, ctx) => {
  // Deaf to ctx.signal and ctx.stopping: nothing stops it but the process's exit.
  record("start", ctx);
  const ms = ctx.attempt === 1 ? payload.first_attempt_ms ?? payload.ms : payload.ms;
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    record("tick", ctx);
  }
  record("end", ctx);
  return { ran_ms: ms };
});

worker.handler<{ ms: number; heartbeat_ms: number }>("long", async (payload, ctx) => {
  record("start", ctx);
  const deadline = Date.now() + payload.ms;
  let heartbeats = 0;
  while (Date.now() < deadline) {
    await sleep(ctx, payload.heartbeat_ms);
    ctx.heartbeat();
    heartbeats += 1;
  }
  return { heartbeats };
});

worker.handler("cancel", async (_payload, ctx) => {
  record("start", ctx);
  await sleep(ctx, 60_000);
  return { cancelled: ctx.isCancelled() };
});

worker.handler("fatal", async (_payload, ctx) => {
  record("start", ctx);
  throw new NonRetryableError("this job cannot succeed", { kind: "ConformanceFatal" });
});

worker.handler<{ bytes: number }>("large", async (payload, ctx) => {
  record("start", ctx);
  return { data: "x".repeat(payload.bytes) };
});

worker.handler<{ child: unknown }>("spawn", async (payload, ctx) => {
  record("start", ctx);
  const child = await ctx.enqueue("echo", payload.child);
  return { child_id: child.id };
});

worker.handler("trace", async (_payload, ctx) => {
  record("start", ctx);
  const span = trace.getActiveSpan() as unknown as ReadableSpan | undefined;
  const spanContext = span?.spanContext();
  return {
    trace_id: spanContext?.traceId ?? "",
    span_id: spanContext?.spanId ?? "",
    parent_span_id: span?.parentSpanContext?.spanId ?? "",
  };
});

// Once stopped, the process ends by itself (nothing else keeps it alive).
worker.run().catch((error: Error) => {
  console.error(error);
  process.exit(1);
});
