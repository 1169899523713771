// Unit tests of the SDK's pure parts (the worker itself is checked by the conformance kit).
import assert from "node:assert/strict";
import { test } from "node:test";
import { trace } from "@opentelemetry/api";
import { backoffDelay } from "../src/backoff";
import { decodePayload, encodePayload } from "../src/codec";
import { errorKind, failure, jobOutcome } from "../src/execution";
import { NonRetryableError } from "../src/errors";
import { asctime, formatJson, formatText, fromEnvironment } from "../src/log";
import { OutcomeReporter } from "../src/outcomes";
import { extract, inject } from "../src/tracing";
import { checkTarget } from "../src/transport";
import { rootLogger } from "../src/log";
import type { JobOutcome, OutcomeResult, WorkerServiceClient } from "../src/gen/workflowjobs/v1/worker_service";

test("backoff follows the RetryPolicy formula and jitter only shortens", () => {
  const config = { initialMs: 100, maximumMs: 1000, multiplier: 2, jitter: 0.5 };
  assert.equal(backoffDelay(1, config, 0), 100);
  assert.equal(backoffDelay(3, config, 0), 400);
  assert.equal(backoffDelay(10, config, 0), 1000, "capped");
  assert.equal(backoffDelay(10, config, 0.999999) > 500, true);
  assert.equal(backoffDelay(2, config, 0.5), 150);
});

test("payloads: JSON by default, bytes as octet-stream, nothing as empty", () => {
  const json = encodePayload({ name: "Ada" });
  assert.equal(json.contentType, "application/json");
  assert.equal(Buffer.from(json.data).toString(), '{"name":"Ada"}');
  assert.deepEqual(decodePayload(json), { name: "Ada" });
  const bytes = encodePayload(new Uint8Array([1, 2]));
  assert.equal(bytes.contentType, "application/octet-stream");
  assert.deepEqual([...(decodePayload(bytes) as Buffer)], [1, 2]);
  assert.equal(encodePayload(undefined).data.length, 0);
  assert.equal(decodePayload(encodePayload(null)), undefined);
  assert.throws(() => decodePayload({ data: Buffer.from("{nope"), contentType: "application/json" }));
});

test("a traceparent round-trips and a bad one gives no parent", () => {
  const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const ctx = extract(traceparent, "vendor=1");
  const span = trace.getSpanContext(ctx);
  assert.equal(span?.traceId, "0af7651916cd43dd8448eb211c80319c");
  assert.equal(span?.isRemote, true);
  assert.deepEqual(inject(span), { traceparent, tracestate: "vendor=1" });
  assert.equal(trace.getSpanContext(extract("00-zz-b7ad6b7169203331-01")), undefined);
  assert.equal(trace.getSpanContext(extract(`00-${"0".repeat(32)}-b7ad6b7169203331-01`)), undefined);
});

test("targets must be host:port", () => {
  assert.equal(checkTarget("127.0.0.1:50051"), "127.0.0.1:50051");
  assert.equal(checkTarget("[::1]:50051"), "[::1]:50051");
  assert.throws(() => checkTarget(":47311x"), /host:port/);
  assert.throws(() => checkTarget("host:99999"), /host:port/);
});

test("log lines have the Python worker's text format; json has the job's fields", () => {
  const t = new Date(2026, 11, 1, 23, 4, 5, 67);
  assert.equal(asctime(t), "2026-12-01 23:04:05,067");
  const record = { time: t, level: "WARNING" as const, logger: "worker_sdk.job", message: "m", fields: { job_id: "j" } };
  assert.equal(formatText(record), "2026-12-01 23:04:05,067 WARNING worker_sdk.job m");
  assert.deepEqual(JSON.parse(formatJson(record)).job_id, "j");
  assert.throws(() => fromEnvironment({ WFJOBS_LOG_LEVEL: "LOUD" }), /WFJOBS_LOG_LEVEL/);
  assert.throws(() => fromEnvironment({ WFJOBS_LOG_FORMAT: "xml" }), /WFJOBS_LOG_FORMAT/);
});

test("failures carry the error's kind; NUL is written out; tracebacks keep their end", () => {
  class DiskFull extends Error {}
  assert.equal(errorKind(new DiskFull("x")), "DiskFull");
  assert.equal(errorKind(new TypeError("x")), "TypeError");
  assert.equal(errorKind(new NonRetryableError("x", { kind: "Bad" })), "Bad");
  assert.equal(errorKind("a string"), "Error");
  const f = failure("a\u0000b", "K", { traceback: "y".repeat(20_000) + "END" });
  assert.equal(f.$case, "failed");
  if (f.$case !== "failed") return;
  assert.equal(f.failed.error, "a\\x00b");
  assert.ok(f.failed.traceback.endsWith("END"));
  assert.ok(Buffer.byteLength(f.failed.traceback) < 16 * 1024 + 64);
  const withPushBack = jobOutcome("j", "t", f, 1500);
  assert.deepEqual(withPushBack.pushBack?.retryAfter, { seconds: 1n, nanos: 500_000_000 });
  assert.equal(jobOutcome("j", "t", f, undefined).pushBack, undefined);
});

test("the reporter sends again only the outcomes answered with a transient code", async () => {
  const calls: string[][] = [];
  const answers: OutcomeResult[][] = [];
  const result = (jobId: string, accepted: boolean, errorCode = ""): OutcomeResult => ({
    jobId,
    accepted,
    errorCode,
    errorMessage: errorCode ? "store away" : "",
    status: 0,
    alreadyRecorded: false,
    note: "",
  });
  answers.push([result("a", true), result("b", false, "UNAVAILABLE"), result("c", false, "FAILED_PRECONDITION")]);
  answers.push([result("b", true)]);
  const stub = {
    reportOutcomes(request: { outcomes: JobOutcome[] }, _md: unknown, _opts: unknown, cb: (e: null, r: unknown) => void) {
      calls.push(request.outcomes.map((o) => o.jobId));
      cb(null, { results: answers.shift() });
    },
  } as unknown as WorkerServiceClient;
  const lines: string[] = [];
  const logger = rootLogger("worker_sdk.outcomes", (r) => lines.push(r.message));
  const reporter = new OutcomeReporter(stub, () => ({}) as never, logger, {
    batchSize: 100,
    lingerMs: 1,
    maxInFlight: 4,
    rpcTimeoutMs: 1000,
    initialBackoffMs: 1,
    maxBackoffMs: 5,
    giveUpAfterMs: 10_000,
  });
  const outcome = (jobId: string): JobOutcome => jobOutcome(jobId, "tok", failure("e", "K"), undefined);
  for (const id of ["a", "b", "c"]) reporter.submit(outcome(id));
  assert.equal(await reporter.flush(5000), true);
  assert.deepEqual(calls, [["a", "b", "c"], ["b"]]);
  assert.ok(lines.some((l) => l.startsWith("outcome of job c not recorded: FAILED_PRECONDITION")));
  assert.equal(reporter.backlog, 0);
});

test("ctx.throttle keeps the longest push-back, holds at 366 days with a warning, refuses a bad one", async () => {
  const { JobContext, MAX_PUSH_BACK_MS } = await import("../src/context");
  const { Job } = await import("../src/gen/workflowjobs/v1/job");
  const records: string[] = [];
  const ctx = new JobContext({
    job: Job.fromPartial({ id: "j1", jobType: "t" }),
    payload: undefined,
    leaseToken: "l1",
    leaseExpireTime: undefined,
    workerId: "w1",
    span: trace.getTracer("test").startSpan("t"),
    logger: rootLogger("worker_sdk.job", (record) => records.push(`${record.level} ${record.message}`)),
    client: undefined,
    onHeartbeat: () => undefined,
  });
  assert.equal(ctx.pushBackMs, undefined, "nothing reported before throttle()");
  ctx.throttle();
  assert.equal(ctx.pushBackMs, null, "no retry-after: the coordinator picks one interval");
  ctx.throttle(2000);
  ctx.throttle(500);
  assert.equal(ctx.pushBackMs, 2000, "the longest is kept");
  ctx.throttle(400 * 24 * 3600 * 1000);
  assert.equal(ctx.pushBackMs, MAX_PUSH_BACK_MS);
  assert.equal(records.length, 1);
  assert.match(records[0]!, /^WARNING push-back retry_after of 34560000000 ms is longer .*366 days/);
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => ctx.throttle(bad), RangeError);
  }
  assert.equal(ctx.pushBackMs, MAX_PUSH_BACK_MS, "a refused call changes nothing");
});

test("an outcome recorded with a note is logged", async () => {
  const stub = {
    reportOutcomes(request: { outcomes: JobOutcome[] }, _md: unknown, _opts: unknown, cb: (e: null, r: unknown) => void) {
      const results: OutcomeResult[] = request.outcomes.map((o) => ({
        jobId: o.jobId,
        accepted: true,
        errorCode: "",
        errorMessage: "",
        status: 0,
        alreadyRecorded: false,
        note: o.jobId === "held" ? "push-back held 366 days" : "",
      }));
      cb(null, { results });
    },
  } as unknown as WorkerServiceClient;
  const lines: string[] = [];
  const logger = rootLogger("worker_sdk.outcomes", (r) => lines.push(`${r.level} ${r.message}`));
  const reporter = new OutcomeReporter(stub, () => ({}) as never, logger, {
    batchSize: 100,
    lingerMs: 1,
    maxInFlight: 4,
    rpcTimeoutMs: 1000,
    initialBackoffMs: 1,
    maxBackoffMs: 5,
    giveUpAfterMs: 10_000,
  });
  for (const id of ["plain", "held"]) reporter.submit(jobOutcome(id, "tok", failure("e", "K"), undefined));
  assert.equal(await reporter.flush(5000), true);
  assert.deepEqual(lines, ["WARNING outcome of job held recorded: push-back held 366 days"]);
});
