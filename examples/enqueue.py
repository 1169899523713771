"""Enqueue a "hello" job and wait for its result.

Run: python examples/enqueue.py [--target HOST:PORT] [NAME]
"""

import argparse

from worker_sdk import SchedulerClient, WorkflowRef

parser = argparse.ArgumentParser()
parser.add_argument("--target")  # default: as wfjobs (WFJOBS_TARGET, profile, 127.0.0.1:50051)
parser.add_argument("name", nargs="?", default="world")
args = parser.parse_args()

with SchedulerClient(args.target) as scheduler:
    job = scheduler.enqueue(
        "hello",
        {"name": args.name},
        tenant_id="default",
        workflow=WorkflowRef(definition_id="greeter", instance_id="greeter-1"),
    )
    print("enqueued", job.id)
    done = scheduler.wait_for_job(job.id, timeout=30)
    print(done.status, done.result_value())
