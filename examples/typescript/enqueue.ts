// Enqueue a "hello" job and wait for its result. Run: node examples/typescript/dist/enqueue.js [NAME] [HOST:PORT]
import { Client, resultOf, statusOf } from "@workflow-jobs/worker";

async function main(): Promise<void> {
  const client = new Client({ target: process.argv[3] ?? "127.0.0.1:50051" });
  const job = await client.enqueue(
    "hello",
    { name: process.argv[2] ?? "world" },
    { tenantId: "default", workflow: { definitionId: "greeter", instanceId: "greeter-1" } },
  );
  console.log("enqueued", job.id);
  const done = await client.waitForJob(job.id, { timeoutMs: 30_000 });
  console.log(statusOf(done), JSON.stringify(resultOf(done)));
  client.close();
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
