/**
 * What a worker prints out of the box: the lines of the Python worker
 * (worker_sdk/_logging.py), in the same format.
 *
 * Level: WFJOBS_LOG_LEVEL (DEBUG, INFO (default), WARNING, ERROR, CRITICAL).
 * Format: WFJOBS_LOG_FORMAT, `text` (default: `<time> <LEVEL> <logger> <message>`)
 * or `json` (one object a line with time, level, logger, message and the job's fields).
 * Lines go to stderr. Pass `logger` to the Worker to send them elsewhere.
 */

export type Level = "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL";

const RANK: Record<Level, number> = { DEBUG: 10, INFO: 20, WARNING: 30, ERROR: 40, CRITICAL: 50 };

/** One log record as the SDK produces it. */
export interface LogRecord {
  time: Date;
  level: Level;
  logger: string;
  message: string;
  fields: Record<string, string | number>;
}

/** Where records go: the default writes them to stderr. */
export type LogSink = (record: LogRecord) => void;

/** A named logger with fixed fields (a job's id, type, tenant and attempt). */
export class Logger {
  constructor(
    readonly name: string,
    private readonly sink: () => LogSink,
    private readonly threshold: () => number,
    readonly fields: Record<string, string | number> = {},
  ) {}

  /** A logger of the same sink with more fields. */
  child(name: string, fields: Record<string, string | number> = {}): Logger {
    return new Logger(name, this.sink, this.threshold, { ...this.fields, ...fields });
  }

  enabled(level: Level): boolean {
    return RANK[level] >= this.threshold();
  }

  log(level: Level, message: string, fields: Record<string, string | number> = {}): void {
    if (!this.enabled(level)) return;
    this.sink()({ time: new Date(), level, logger: this.name, message, fields: { ...this.fields, ...fields } });
  }

  debug(message: string): void {
    this.log("DEBUG", message);
  }
  info(message: string): void {
    this.log("INFO", message);
  }
  warning(message: string): void {
    this.log("WARNING", message);
  }
  warn(message: string): void {
    this.log("WARNING", message);
  }
  error(message: string): void {
    this.log("ERROR", message);
  }
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, "0");
}

/** `2026-12-01 23:40:00,123`, local time, as Python's logging writes asctime. */
export function asctime(t: Date): string {
  return (
    `${t.getFullYear()}-${pad(t.getMonth() + 1)}-${pad(t.getDate())} ` +
    `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())},${pad(t.getMilliseconds(), 3)}`
  );
}

export function formatText(record: LogRecord): string {
  return `${asctime(record.time)} ${record.level} ${record.logger} ${record.message}`;
}

export function formatJson(record: LogRecord): string {
  return JSON.stringify({
    time: record.time.toISOString().replace("Z", "+00:00"),
    level: record.level,
    logger: record.logger,
    message: record.message,
    ...record.fields,
  });
}

const LEVEL_ENV = "WFJOBS_LOG_LEVEL";
const FORMAT_ENV = "WFJOBS_LOG_FORMAT";

/** The level and sink the environment asks for; throws on a value it cannot take. */
export function fromEnvironment(env: NodeJS.ProcessEnv = process.env): { level: number; sink: LogSink } {
  const levelName = (env[LEVEL_ENV] ?? "").trim().toUpperCase();
  const format = (env[FORMAT_ENV] ?? "").trim().toLowerCase() || "text";
  if (levelName && !(levelName in RANK)) {
    throw new Error(`${LEVEL_ENV} must be one of ${Object.keys(RANK).join(", ")}, not '${env[LEVEL_ENV]}'`);
  }
  if (format !== "text" && format !== "json") {
    throw new Error(`${FORMAT_ENV} must be 'text' or 'json', not '${env[FORMAT_ENV]}'`);
  }
  const write = format === "json" ? formatJson : formatText;
  return {
    level: RANK[(levelName || "INFO") as Level],
    sink: (record) => process.stderr.write(write(record) + "\n"),
  };
}

/** The root logger of the SDK (`worker_sdk`), configured from the environment on first use. */
let configured: { level: number; sink: LogSink } | undefined;
export function rootLogger(name: string, sink?: LogSink): Logger {
  return new Logger(
    name,
    () => sink ?? (configured ??= fromEnvironment()).sink,
    () => (configured ??= fromEnvironment()).level,
  );
}

/** `%.3f`-style fixed decimals, as the Python lines print durations. */
export function fixed(value: number, digits: number): string {
  return value.toFixed(digits);
}
