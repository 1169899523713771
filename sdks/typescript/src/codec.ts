/** Payloads: JSON by default, bytes as application/octet-stream (worker_sdk/_codec.py's rules). */
import type { Payload } from "./gen/workflowjobs/v1/job";

export const JSON_CONTENT_TYPE = "application/json";
export const BYTES_CONTENT_TYPE = "application/octet-stream";

/** A value as a Payload: undefined/null -> empty, bytes as they are, anything else as JSON. */
export function encodePayload(value: unknown): Payload {
  if (value === undefined || value === null) return { data: Buffer.alloc(0), contentType: "" };
  if (value instanceof Uint8Array) return { data: Buffer.from(value), contentType: BYTES_CONTENT_TYPE };
  const text = JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
  if (text === undefined) throw new TypeError(`cannot encode ${typeof value} as JSON`);
  return { data: Buffer.from(text, "utf8"), contentType: JSON_CONTENT_TYPE };
}

/** A payload decoded: JSON content (or none given) parsed, anything else as a Buffer. */
export function decodePayload(payload: Payload | undefined): unknown {
  if (payload === undefined || payload.data.length === 0) return undefined;
  const media = payload.contentType.split(";")[0].trim().toLowerCase();
  if (media === "" || media === JSON_CONTENT_TYPE || media.endsWith("+json")) {
    return JSON.parse(Buffer.from(payload.data).toString("utf8"));
  }
  return Buffer.from(payload.data);
}
