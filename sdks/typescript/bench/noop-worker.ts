// The bench's TypeScript worker process: one Worker with a no-op "noop" handler (bench/typescript.py).
// Run: node dist/bench/noop-worker.js --target HOST:PORT [--concurrency 200]
import { parseArgs } from "node:util";
import { Worker } from "../src/index";

const { values } = parseArgs({
  options: { target: { type: "string" }, concurrency: { type: "string", default: "200" } },
});

const worker = new Worker({ target: values.target, concurrency: Number(values.concurrency) });
worker.handler("noop", () => undefined);
worker.run().then(
  () => process.exit(0),
  (error: Error) => {
    console.error(error);
    process.exit(1);
  },
);
