"""Harness of the ingress tests: real brokers, a real coordinator, the adapter as a process.

The brokers are the machine's own (RabbitMQ 127.0.0.1:5672, NATS with
JetStream 127.0.0.1:4222; override with WFJOBS_TEST_AMQP / WFJOBS_TEST_NATS).
Tests skip, with the reason, when a broker does not answer and CI is not set;
under CI=true an unreachable broker is a failure. Every test uses queues,
streams and subjects of its own (uuid suffix) and deletes them at the end.

``Broker`` hides the broker behind the few verbs the tests need, so each
scenario runs unchanged against both (one conformance suite).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from wfj_testing import Coordinator, ManagedProcess, wait_until
from worker_sdk import AdminClient, JobFilter, JobView

AMQP_URL = os.environ.get("WFJOBS_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
NATS_URL = os.environ.get("WFJOBS_TEST_NATS", "nats://127.0.0.1:4222")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def require(problem: str | None, what: str) -> None:
    if problem:
        if IN_CI:
            pytest.fail(f"{problem} (CI=true requires {what})")
        pytest.skip(problem)


# -- brokers ---------------------------------------------------------------------------------


@dataclass
class DeadLetter:
    body: bytes
    reason: str
    headers: dict[str, Any]


class Broker:
    """One broker, one test's queue or subject on it."""

    name: str

    def adapter_args(self) -> list[str]:
        raise NotImplementedError

    def publish(self, body: bytes, message_id: str | None = None) -> None:
        raise NotImplementedError

    def unsettled(self) -> int:
        """Messages not yet acked, rejected or terminated (stop the RabbitMQ adapter first:
        without the management plugin only ready messages can be counted)."""
        raise NotImplementedError

    def dead_letters(self) -> list[DeadLetter]:
        raise NotImplementedError

    def cleanup(self) -> None:
        raise NotImplementedError


class RabbitBroker(Broker):
    name = "rabbitmq"

    def __init__(self, suffix: str) -> None:
        self.queue = f"wfj-ingress-{suffix}"
        self.dead_letter = f"{self.queue}.dead-letter"
        self._dead_letters: list[DeadLetter] = []  # taken off the queue by dead_letters()
        _run(self._declare())

    async def _channel(self) -> Any:
        import aio_pika

        connection = await aio_pika.connect(AMQP_URL)
        return connection, await connection.channel()

    async def _declare(self) -> None:
        connection, channel = await self._channel()
        async with connection:
            await channel.declare_queue(self.queue, durable=True)

    def adapter_args(self) -> list[str]:
        return ["rabbitmq", "--url", AMQP_URL, "--queue", self.queue]

    def publish(self, body: bytes, message_id: str | None = None) -> None:
        async def go() -> None:
            import aio_pika

            connection, channel = await self._channel()
            async with connection:
                await channel.default_exchange.publish(
                    aio_pika.Message(
                        body,
                        message_id=message_id,
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    ),
                    routing_key=self.queue,
                )

        _run(go())

    def unsettled(self) -> int:
        async def go() -> int:
            connection, channel = await self._channel()
            async with connection:
                queue = await channel.declare_queue(self.queue, passive=True)
                return int(queue.declaration_result.message_count or 0)

        return int(_run(go()))

    def dead_letters(self) -> list[DeadLetter]:
        """Every dead letter so far (reading takes them off the queue, so they are kept)."""

        async def go() -> list[DeadLetter]:
            connection, channel = await self._channel()
            found = self._dead_letters
            async with connection:
                try:
                    queue = await channel.declare_queue(self.dead_letter, passive=True)
                except Exception:
                    return list(found)
                while (message := await queue.get(fail=False)) is not None:
                    headers = dict(message.headers or {})
                    reason = headers.get("x-wfjobs-dead-letter-reason", "")
                    if isinstance(reason, bytes):
                        reason = reason.decode()
                    found.append(DeadLetter(message.body, str(reason), headers))
                    await message.ack()
            return list(found)

        return list(_run(go()))

    def cleanup(self) -> None:
        async def go() -> None:
            connection, channel = await self._channel()
            async with connection:
                for queue in (self.queue, self.dead_letter):
                    await channel.queue_delete(queue)
                await channel.exchange_delete(self.dead_letter)

        _run(go())


class NatsBroker(Broker):
    name = "nats"

    def __init__(self, suffix: str) -> None:
        self.stream = f"WFJ_INGRESS_{suffix}"
        self.subject = f"wfj.ingress.{suffix}"
        self.dead_letter_subject = f"wfjobs.dead-letter.{self.stream}"
        self.dead_letter_stream = f"{self.stream}_DEAD_LETTER"
        self.durable = f"wfj-ingress-{suffix}"
        _run(self._js(lambda js: js.add_stream(name=self.stream, subjects=[self.subject])))

    async def _js(self, action: Any) -> Any:
        import nats

        nc = await nats.connect(NATS_URL)
        try:
            return await action(nc.jetstream())
        finally:
            await nc.close()

    def adapter_args(self) -> list[str]:
        return [
            "nats",
            "--servers",
            NATS_URL,
            "--subject",
            self.subject,
            "--stream",
            self.stream,
            "--durable",
            self.durable,
            # The kill-before-ack test waits for a redelivery; keep it short.
            "--ack-wait",
            "1",
        ]

    def publish(self, body: bytes, message_id: str | None = None) -> None:
        headers = {"Nats-Msg-Id": message_id} if message_id else None
        _run(self._js(lambda js: js.publish(self.subject, body, headers=headers)))

    def unsettled(self) -> int:
        async def go(js: Any) -> int:
            from nats.js.errors import NotFoundError

            try:
                info = await js.consumer_info(self.stream, self.durable)
            except NotFoundError:
                stream = await js.stream_info(self.stream)
                return int(stream.state.messages)
            return int(info.num_pending + info.num_ack_pending)

        return int(_run(self._js(go)))

    def dead_letters(self) -> list[DeadLetter]:
        async def go(js: Any) -> list[DeadLetter]:
            from nats.js.errors import NotFoundError

            try:
                state = (await js.stream_info(self.dead_letter_stream)).state
            except NotFoundError:
                return []
            found = []
            for seq in range(state.first_seq, state.last_seq + 1) if state.messages else ():
                message = await js.get_msg(self.dead_letter_stream, seq)
                headers = dict(message.headers or {})
                found.append(
                    DeadLetter(
                        message.data or b"", headers.get("Wfjobs-Dead-Letter-Reason", ""), headers
                    )
                )
            return found

        return list(_run(self._js(go)))

    def cleanup(self) -> None:
        async def go(js: Any) -> None:
            from nats.js.errors import NotFoundError

            for stream in (self.stream, self.dead_letter_stream):
                try:
                    await js.delete_stream(stream)
                except NotFoundError:
                    pass

        _run(self._js(go))


def rabbit_problem() -> str | None:
    async def go() -> None:
        import aio_pika

        connection = await asyncio.wait_for(aio_pika.connect(AMQP_URL), 5)
        await connection.close()

    try:
        _run(go())
    except Exception as e:
        return f"RabbitMQ not reachable at {AMQP_URL}: {type(e).__name__}: {e}"
    return None


def nats_problem() -> str | None:
    async def go() -> None:
        import nats

        nc = await nats.connect(NATS_URL, connect_timeout=3, max_reconnect_attempts=0)
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()

    try:
        _run(go())
    except Exception as e:
        return f"NATS with JetStream not reachable at {NATS_URL}: {type(e).__name__}: {e}"
    return None


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Process(ManagedProcess):
    """A subprocess with its output in a log file (no SDK token in its environment)."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self._spawn(args, log_path, without=("WFJOBS_TOKEN",))


def start_coordinator(database_url: str, port: int, log_path: Path) -> Coordinator:
    """A coordinator on a fixed port, so an adapter can be started before it."""
    return Coordinator(
        database_url, log_path, listen=f"127.0.0.1:{port}", args=("--drain-timeout", "2")
    )


class Adapter(Process):
    """``python -m worker_sdk.ingress`` (or a script standing in for it) as a process."""

    def wait_ready(self) -> None:
        def ready() -> bool:
            if not self.alive():
                raise AssertionError(f"adapter exited: {self.log()[-3000:]}")
            return "ingress consuming" in self.log()

        wait_until(ready, 30, f"the adapter to consume (log: {self.log_path})")

    def count(self, text: str) -> int:
        return self.log().count(text)


@dataclass
class Ingress:
    """What a test drives: the broker, a coordinator target and process starters."""

    broker: Broker
    target: str
    tmp: Path
    database_url: str
    started: list[Process]

    def coordinator(self) -> Coordinator:
        port = int(self.target.rsplit(":", 1)[1])
        c = start_coordinator(
            self.database_url, port, self.tmp / f"coordinator-{len(self.started)}.log"
        )
        self.started.append(c)
        return c

    def adapter(self, *extra: str, script: Path | None = None, ready: bool = True) -> Adapter:
        entry = [str(script)] if script else ["-m", "worker_sdk.ingress"]
        args = [
            sys.executable,
            *entry,
            *self.broker.adapter_args(),
            "--target",
            self.target,
            "--backoff-initial",
            "0.05",
            "--backoff-max",
            "0.5",
            "--rpc-timeout",
            "5",
            *extra,
        ]
        a = Adapter(args, self.tmp / f"adapter-{len(self.started)}.log")
        self.started.append(a)
        if ready:
            a.wait_ready()
        return a

    def jobs(self, **filter_fields: Any) -> list[JobView]:
        with AdminClient(self.target) as admin:
            return list(admin.iter_jobs(JobFilter(**filter_fields)))


def envelope(**fields: Any) -> bytes:
    """A JSON envelope body."""
    return json.dumps(fields).encode()
