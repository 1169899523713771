/** How the SDK connects: target, TLS, bearer token, channel options. */
import * as fs from "node:fs";
import * as grpc from "@grpc/grpc-js";

/** Largest message the SDK's channels accept by default (the Python SDK's too). */
export const MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024;

/**
 * Keepalive of every channel the SDK opens (channelOptions given win): a ping
 * every 10 s, answered within 5 s or the connection is closed, with or without
 * calls in flight. A path to the coordinator that goes silent without a reset
 * is found within about 15 s and the worker reconnects over a new connection.
 * The coordinator permits these pings (one every 5 s at most).
 */
export const KEEPALIVE_OPTIONS: grpc.ChannelOptions = {
  "grpc.keepalive_time_ms": 10_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.keepalive_permit_without_calls": 1,
};

/** TLS settings: PEM contents or file names. `true`: TLS with the system's roots. */
export interface TlsOptions {
  /** CA bundle to verify the coordinator with (default: the system's roots). */
  ca?: string | Buffer;
  caFile?: string;
  /** Client certificate and key for mutual TLS. */
  cert?: string | Buffer;
  certFile?: string;
  key?: string | Buffer;
  keyFile?: string;
  /** Name to verify in the coordinator's certificate when it differs from the target's host. */
  serverName?: string;
}

export interface ConnectionOptions {
  /** `host:port` of the coordinator (default 127.0.0.1:50051). */
  target?: string;
  /** Bearer token (default: the WFJOBS_TOKEN environment variable). */
  token?: string;
  /** TLS: true, a TlsOptions, or ready-made channel credentials. Plaintext when unset. */
  tls?: boolean | TlsOptions | grpc.ChannelCredentials;
  /** Extra metadata sent with every call. */
  metadata?: Record<string, string>;
  /** Extra gRPC channel options. */
  channelOptions?: grpc.ChannelOptions;
}

/** `host:port`, or a refusal saying why (a setting that can never work is not retried). */
export function checkTarget(target: string): string {
  const match = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(target) ?? /^(dns|unix|ipv4|ipv6):.+$/.exec(target);
  if (!match || (match[2] !== undefined && Number(match[2]) > 65535)) {
    throw new Error(`target must be host:port, not '${target}'`);
  }
  return target;
}

function pem(value: string | Buffer | undefined, file: string | undefined): Buffer | null {
  if (value !== undefined) return Buffer.isBuffer(value) ? value : Buffer.from(value);
  if (file !== undefined) return fs.readFileSync(file);
  return null;
}

/** A resolved connection: one per Worker or Client. */
export class Connection {
  readonly target: string;
  readonly credentials: grpc.ChannelCredentials;
  readonly channelOptions: grpc.ChannelOptions;
  readonly serverName: string | undefined;
  private readonly pairs: [string, string][];

  constructor(options: ConnectionOptions) {
    this.target = checkTarget(options.target ?? "127.0.0.1:50051");
    const tls = options.tls;
    let serverName: string | undefined;
    if (tls === undefined || tls === false) {
      this.credentials = grpc.credentials.createInsecure();
    } else if (tls === true) {
      this.credentials = grpc.credentials.createSsl();
    } else if (tls instanceof grpc.ChannelCredentials) {
      this.credentials = tls;
    } else {
      this.credentials = grpc.credentials.createSsl(
        pem(tls.ca, tls.caFile),
        pem(tls.key, tls.keyFile),
        pem(tls.cert, tls.certFile),
      );
      serverName = tls.serverName;
    }
    this.serverName = serverName;
    this.pairs = Object.entries(options.metadata ?? {}).map(([k, v]) => [k.toLowerCase(), v]);
    const token = options.token ?? (process.env.WFJOBS_TOKEN || undefined);
    if (token) this.pairs.push(["authorization", `Bearer ${token}`]);
    this.channelOptions = {
      "grpc.max_receive_message_length": MAX_RECEIVE_MESSAGE_BYTES,
      ...KEEPALIVE_OPTIONS,
      ...(serverName ? { "grpc.ssl_target_name_override": serverName, "grpc.default_authority": serverName } : {}),
      ...(options.channelOptions ?? {}),
    };
  }

  /** The receive limit the channel applies, as WorkerHello.max_receive_message_bytes announces it. */
  get maxReceiveMessageBytes(): number {
    const value = Number(this.channelOptions["grpc.max_receive_message_length"]);
    return value >= 0 && value < 2 ** 31 ? value : 2 ** 31 - 1;
  }

  /** The metadata of every call (a fresh object: grpc-js may add to it). */
  metadata(extra: Record<string, string> = {}): grpc.Metadata {
    const md = new grpc.Metadata();
    for (const [k, v] of this.pairs) md.add(k, v);
    for (const [k, v] of Object.entries(extra)) md.set(k, v);
    return md;
  }
}
