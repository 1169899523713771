/** The SDK's version, announced in WorkerHello.sdk_version. */
export const VERSION = "0.1.0";
