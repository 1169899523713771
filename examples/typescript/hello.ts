// A TypeScript worker for the README's hello job. Run: node examples/typescript/dist/hello.js [HOST:PORT]
import { Worker } from "@workflow-jobs/worker";

interface Greeting {
  name: string;
}

const worker = new Worker({ target: process.argv[2] ?? "127.0.0.1:50051", concurrency: 10 });

worker.handler<Greeting>("hello", async (greeting, ctx) => {
  ctx.logger.info(`hello, ${greeting.name} (attempt ${ctx.attempt})`);
  return { greeting: `Hello, ${greeting.name}!` };
});

worker.run().catch((error) => {
  console.error(error);
  process.exit(1);
});
