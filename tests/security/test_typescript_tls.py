"""The TypeScript SDK over mutual TLS: its Worker and Client take `tls: {caFile, certFile, keyFile}`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from faults.harness import CoordinatorProcess
from security.certs import make_pems

from wfj_testing import REPO, missing_tool

pytestmark = pytest.mark.e2e

SDK = REPO / "sdks" / "typescript" / "dist" / "src" / "index.js"

SCRIPT = """
const { Worker, Client, statusOf, resultOf } = require(process.env.SDK);
const [target, ca, cert, key] = process.argv.slice(1);
const tls = { caFile: ca, certFile: cert, keyFile: key };
(async () => {
  const worker = new Worker({ target, tls, concurrency: 2 });
  worker.handler("tls-echo", async (payload) => payload);
  const running = worker.run({ handleSignals: false });
  const client = new Client({ target, tls });
  const job = await client.enqueue("tls-echo", { over: "mtls" }, { tenantId: "default" });
  const done = await client.waitForJob(job.id, { timeoutMs: 30000 });
  let refused = "";
  try {
    await new Client({ target, tls: { caFile: ca }, timeoutMs: 5000 }).getJob(job.id);
  } catch (error) {
    refused = error.codeName;
  }
  console.log(JSON.stringify({ status: statusOf(done), result: resultOf(done), refused }));
  await worker.shutdown();
  await running;
  client.close();
  process.exit(0);
})().catch((error) => { console.error(error); process.exit(1); });
"""


def test_a_typescript_worker_and_client_over_mutual_tls(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not SDK.exists():
        missing_tool("Node.js and the built TypeScript SDK (make install)")
    (tmp_path / "pki").mkdir()
    pems = make_pems(tmp_path / "pki")
    coordinator = CoordinatorProcess(
        f"sqlite:///{tmp_path / 'tls.db'}",
        tmp_path,
        args=[
            "--tls-cert",
            str(pems.server_cert),
            "--tls-key",
            str(pems.server_key),
            "--tls-client-ca",
            str(pems.ca),
        ],
    )
    try:
        out = subprocess.run(
            [
                node,
                "-e",
                SCRIPT,
                coordinator.target,
                str(pems.ca),
                str(pems.client_cert),
                str(pems.client_key),
            ],
            env={"SDK": str(SDK), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=90,
        )
    finally:
        coordinator.stop()
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["status"] == "COMPLETED" and seen["result"] == {"over": "mtls"}
    # Without a client certificate the coordinator refuses the handshake.
    assert seen["refused"] == "UNAVAILABLE"
    assert "connected to coordinator" in out.stderr
