/**
 * Lease heartbeats: one loop renews every lease the worker holds (running
 * jobs, and finished ones whose outcome is not recorded yet), in chunks of
 * 500 per Heartbeat call; answers go back per lease. `trigger()` asks for an
 * early tick (ctx.heartbeat()). With no lease held, a tick sends nothing.
 */
import type * as grpc from "@grpc/grpc-js";
import { statusName, unary } from "./client";
import type { LeaseRef, LeaseStatus, WorkerServiceClient } from "./gen/workflowjobs/v1/worker_service";
import type { Logger } from "./log";

const CHUNK = 500;

export class Heartbeater {
  private timer: NodeJS.Timeout | undefined;
  private lastTick = Date.now();
  private failing = false;
  private running = false;
  private stopped = false;
  private again = false;

  constructor(
    private readonly stub: WorkerServiceClient,
    private readonly workerId: string,
    private readonly leases: () => LeaseRef[],
    private readonly onStatus: (ref: LeaseRef, status: LeaseStatus) => void,
    private readonly interval: () => number,
    private readonly metadata: () => grpc.Metadata,
    private readonly logger: Logger,
    private readonly rpcTimeoutMs = 10_000,
  ) {}

  start(): void {
    this.lastTick = Date.now();
    this.reschedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
  }

  /** A tick now. */
  trigger(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer !== undefined) clearTimeout(this.timer);
    void this.tick();
  }

  /** Re-read the interval (after the coordinator recommended one, or a shorter lease arrived). */
  reschedule(): void {
    if (this.stopped || this.running) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    let interval = this.interval();
    if (this.failing) interval = Math.min(interval, 1_000);
    const wait = Math.max(0, this.lastTick + interval - Date.now());
    this.timer = setTimeout(() => void this.tick(), wait);
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.running = true;
    this.lastTick = Date.now();
    try {
      await this.runOnce();
    } finally {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.trigger();
      } else {
        this.reschedule();
      }
    }
  }

  /** One round of heartbeats for every held lease. */
  async runOnce(): Promise<void> {
    const leases = this.leases();
    if (leases.length === 0) return;
    for (let start = 0; start < leases.length; start += CHUNK) {
      const chunk = leases.slice(start, start + CHUNK);
      let response;
      try {
        response = await unary(
          this.stub.heartbeat.bind(this.stub),
          { workerId: this.workerId, leases: chunk },
          this.metadata(),
          this.rpcTimeoutMs,
        );
      } catch (error) {
        const e = error as { code: number; message: string };
        const line = `heartbeat of ${chunk.length} lease(s) failed: ${statusName(e.code)}: ${e.message.replace(/^[A-Z_]+: /, "")}`;
        if (this.failing) this.logger.debug(line);
        else this.logger.warning(line);
        this.failing = true;
        return;
      }
      chunk.forEach((ref, i) => {
        const status = response.leases[i];
        if (status !== undefined) this.onStatus(ref, status);
      });
    }
    if (this.failing) this.logger.info("heartbeats recovered");
    this.failing = false;
  }
}
