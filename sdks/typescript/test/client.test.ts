// The client and an in-process Worker against a real coordinator (the repository's .venv runs it).
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, test } from "node:test";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import * as grpc from "@grpc/grpc-js";
import { Client, JobEventKind, JobStatus, RetryAfterError, Worker, resultOf, statusOf } from "../src/index";
import { AdminServiceClient } from "../src/gen/workflowjobs/v1/admin_service";
import type { LogRecord } from "../src/log";

const REPO = path.resolve(__dirname, "../../../..");
const PYTHON = path.join(REPO, ".venv", "bin", "python");
const exporter = new InMemorySpanExporter();
let coordinator: ChildProcess;
let target = "";
let tmp = "";

before(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "wfjobs-ts-"));
  coordinator = spawn(
    PYTHON,
    ["-m", "coordinator", "serve", "--listen", "127.0.0.1:0", "--database-url", `sqlite:///${tmp}/c.db`, "--migrate"],
    { cwd: REPO, env: { ...process.env, PYTHONPATH: REPO }, stdio: ["ignore", "pipe", "pipe"] },
  );
  target = await new Promise<string>((resolve, reject) => {
    let log = "";
    const timer = setTimeout(() => reject(new Error(`no coordinator: ${log}`)), 30_000);
    const read = (chunk: Buffer) => {
      log += chunk.toString();
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(log);
      if (match) {
        clearTimeout(timer);
        resolve(`127.0.0.1:${match[1]}`);
      }
    };
    coordinator.stdout?.on("data", read);
    coordinator.stderr?.on("data", read);
    coordinator.on("exit", (code) => reject(new Error(`coordinator exited ${code}: ${log}`)));
  });
});

after(() => {
  coordinator.kill("SIGTERM");
  fs.rmSync(tmp, { recursive: true, force: true });
});

test("enqueue, enqueue a batch, run, wait and watch: the client and the worker agree", async () => {
  const client = new Client({ target });
  const records: LogRecord[] = [];
  const worker = new Worker({ target, concurrency: 4, workerId: "ts-test", logSink: (r) => records.push(r) });
  const seen: { payload: unknown; attempt: number; tenant: string }[] = [];
  let askedFor: Date | undefined;
  worker.handler<{ n: number }>("double", async (payload, ctx) => {
    seen.push({ payload, attempt: ctx.attempt, tenant: ctx.tenantId });
    if (payload.n === 0 && ctx.attempt === 1) {
      const error = new RetryAfterError("not yet", 1_500);
      askedFor = error.at;
      throw error;
    }
    return { doubled: payload.n * 2 };
  });
  const running = worker.run({ handleSignals: false });
  try {
    const parent = trace.getTracer("test").startSpan("request");
    const one = await context.with(trace.setSpan(context.active(), parent), () =>
      client.enqueue("double", { n: 21 }, { tenantId: "t1", workflow: { definitionId: "d" } }),
    );
    parent.end();
    assert.equal(one.traceparent.split("-")[1], parent.spanContext().traceId, "the enqueuer's trace");
    const results = await client.enqueueBatch([
      { jobType: "double", payload: { n: 1 }, tenantId: "t1" },
      { jobType: "double", payload: { n: 0 }, tenantId: "t1", retryPolicy: { maxAttempts: 3 } },
    ]);
    assert.equal(results.length, 2);
    const done = await client.waitForJob(one.id, { timeoutMs: 30_000 });
    assert.equal(statusOf(done), "COMPLETED");
    assert.deepEqual(resultOf(done), { doubled: 42 });
    assert.equal(done.workflow?.definitionId, "d");
    const retried = await client.waitForJob(results[1].jobId, { timeoutMs: 30_000 });
    const withHistory = await client.getJob(retried.id, { attempts: true });
    assert.equal(withHistory.status, JobStatus.JOB_STATUS_COMPLETED);
    const [failed, completed] = withHistory.attempts;
    assert.equal(failed.errorKind, "RetryAfterError");
    assert.ok(completed.startTime!.getTime() >= askedFor!.getTime(), "not before the handler's time");
    // The coordinator scheduled the retry at the handler's time, not by the policy's backoff.
    const scheduled = [];
    const stop = new AbortController();
    for await (const event of client.watchEvents({ jobId: retried.id }, { fromOldest: true, signal: stop.signal })) {
      if (event.kind === JobEventKind.JOB_EVENT_KIND_RETRY_SCHEDULED) scheduled.push(event.dueTime!.getTime());
      if (event.kind === JobEventKind.JOB_EVENT_KIND_COMPLETED) stop.abort();
    }
    assert.deepEqual(scheduled, [askedFor!.getTime()]);

    // Every event of the first job, from the oldest kept.
    const kinds: JobEventKind[] = [];
    const abort = new AbortController();
    for await (const event of client.watchEvents({ jobId: one.id }, { fromOldest: true, signal: abort.signal })) {
      kinds.push(event.kind);
      if (event.kind === JobEventKind.JOB_EVENT_KIND_COMPLETED) abort.abort();
    }
    assert.deepEqual(kinds, [
      JobEventKind.JOB_EVENT_KIND_ENQUEUED,
      JobEventKind.JOB_EVENT_KIND_STARTED,
      JobEventKind.JOB_EVENT_KIND_COMPLETED,
    ]);
  } finally {
    await worker.shutdown();
    await running;
    client.close();
  }
  assert.deepEqual(
    seen.map((s) => s.tenant),
    ["t1", "t1", "t1", "t1"],
  );
  const messages = records.map((r) => `${r.level} ${r.logger} ${r.message}`);
  assert.ok(messages.some((m) => m.startsWith("INFO worker_sdk.worker worker ts-test started (workflow-jobs ")));
  assert.ok(messages.some((m) => m.includes("attempt 1/3 failed after ") && m.endsWith("s: RetryAfterError: not yet")));
  assert.ok(messages.includes("INFO worker_sdk.worker worker ts-test stopped"));
  // Each attempt was an `execute double` span under the enqueuer's trace.
  const spans = exporter.getFinishedSpans().filter((s) => s.name === "execute double");
  assert.equal(spans.length, 4, "one span per attempt");
  const enqueueSpan = exporter.getFinishedSpans().find((s) => s.name === "enqueue double");
  assert.ok(enqueueSpan);
  assert.ok(
    spans.some((s) => s.parentSpanContext?.spanId === enqueueSpan.spanContext().spanId),
    "an attempt's span is the enqueue span's child",
  );
});

test("a lease lost after a cancel request is lost: ctx.leaseLost turns true and nothing is reported", async () => {
  const client = new Client({ target });
  const admin = new AdminServiceClient(target, grpc.credentials.createInsecure());
  const adminCall = <T>(call: (done: (error: grpc.ServiceError | null, value?: T) => void) => void) =>
    new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value as T))));
  const records: LogRecord[] = [];
  const worker = new Worker({
    target,
    concurrency: 1,
    workerId: "ts-lost-after-cancel",
    heartbeatIntervalMs: 100,
    cancelGraceMs: 60_000, // the attempt is not settled by the cancel grace meanwhile
    logSink: (r) => records.push(r),
  });
  let started!: () => void;
  const handlerStarted = new Promise<void>((resolve) => (started = resolve));
  let sawCancel!: () => void;
  const cancelSeen = new Promise<void>((resolve) => (sawCancel = resolve));
  const seen: { reason: string | undefined; leaseLost: boolean }[] = [];
  worker.handler("cancel-then-lost", async (_payload, ctx) => {
    started();
    await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
    sawCancel();
    const deadline = Date.now() + 20_000;
    while (!ctx.leaseLost && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    seen.push({ reason: ctx.cancelReason, leaseLost: ctx.leaseLost });
    return { finished: true };
  });
  const running = worker.run({ handleSignals: false });
  try {
    const job = await client.enqueue("cancel-then-lost", {}, { tenantId: "t1" });
    await handlerStarted;
    await adminCall((done) => admin.cancelJob({ jobId: job.id, reason: "" }, done));
    await cancelSeen; // CANCEL_REQUESTED came first
    await adminCall((done) => admin.unlockJob({ jobId: job.id }, done)); // then LOST
    const ended = await client.waitForJob(job.id, { timeoutMs: 30_000 });
    assert.equal(statusOf(ended), "CANCELLED");
    const deadline = Date.now() + 20_000;
    while (seen.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    await worker.shutdown();
    await running;
    client.close();
    admin.close();
  }
  assert.deepEqual(seen, [{ reason: "cancel requested", leaseLost: true }]);
  const messages = records.map((r) => r.message);
  assert.ok(messages.some((m) => m.endsWith("finished after its lease was lost; outcome not reported")), messages.join("\n"));
  assert.ok(!messages.some((m) => m.includes("lease lost") && m.includes("rejected")), "nothing was sent under the lost lease");
});

test("a handler's validate option refuses a payload for good before the handler runs, and hands on what it returns", async () => {
  const client = new Client({ target });
  const worker = new Worker({ target, concurrency: 2, workerId: "ts-validate", logSink: () => undefined });
  const handled: unknown[] = [];
  worker.handler<{ n: number }>(
    "validated",
    async (payload) => {
      handled.push(payload);
      return { doubled: payload.n * 2 };
    },
    {
      validate: (payload) => {
        const n = (payload as { n?: unknown } | null)?.n;
        if (typeof n !== "number") throw new TypeError(`n must be a number, got ${JSON.stringify(n)}`);
        return { n };
      },
    },
  );
  const running = worker.run({ handleSignals: false });
  try {
    const bad = await client.enqueue("validated", { n: "2" }, { tenantId: "t1", retryPolicy: { maxAttempts: 3 } });
    const good = await client.enqueue("validated", { n: 2, extra: true }, { tenantId: "t1" });
    const refused = await client.getJob((await client.waitForJob(bad.id, { timeoutMs: 30_000 })).id, { attempts: true });
    assert.equal(statusOf(refused), "FAULTED");
    assert.equal(refused.attempts.length, 1, "not retried");
    assert.equal(refused.attempts[0].errorKind, "PayloadValidationError");
    assert.equal(refused.attempts[0].error, 'PayloadValidationError: n must be a number, got "2"');
    const done = await client.waitForJob(good.id, { timeoutMs: 30_000 });
    assert.deepEqual(resultOf(done), { doubled: 4 });
  } finally {
    await worker.shutdown();
    await running;
    client.close();
  }
  assert.deepEqual(handled, [{ n: 2 }], "the handler got what validate returned, and only that");
});
