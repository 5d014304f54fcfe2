"""The worker on the wire, with the test playing the dispatcher: real
RabbitMQ and Redis, no Kairos processes. Checks what the dispatcher cannot
show through its API: the exact messages (incarnation, handlers, group,
held, log batches), refusal for reroute when full, the attempt key's value,
duplicates skipped, attempts stopped before they start never run, malformed
dispatches dead-lettered, the shutdown heartbeats, and recovery when RabbitMQ
or Redis drop the worker's connection.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from typing import Any, AsyncIterator

import aio_pika
import aiormq
import pytest
import redis.asyncio as aioredis

from harness import AMQP_URL, EXAMPLE_WORKER, REDIS_URL, _delete_amqp_names, unique
from kairos_worker import JobContext, Worker
from kairos_worker.protocol import STOPPED_ERROR

WID = "py-wire"


class Wire:
    """A namespace with one example worker in it, and the dispatcher's side
    of the conversation."""

    def __init__(self, conn: aio_pika.abc.AbstractConnection, rds: aioredis.Redis, ns: str) -> None:
        self.conn, self.redis, self.ns = conn, rds, ns
        self.proc: subprocess.Popen[bytes] | None = None
        #: Every message taken off each queue, matching or not.
        self.seen: dict[str, list[dict[str, Any]]] = {}

    def start_worker(self, **env: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLE_WORKER)],
            env={
                "PATH": "/usr/bin:/bin",
                "PYTHONUNBUFFERED": "1",
                "KAIROS_AMQP_URL": AMQP_URL,
                "KAIROS_REDIS_URL": REDIS_URL,
                "KAIROS_NAMESPACE": self.ns,
                "KAIROS_WORKER_ID": WID,
                "KAIROS_WORKER_HEARTBEAT_MS": "200",
                **env,
            },
            stdin=subprocess.DEVNULL,
        )

    async def dispatch(self, execution_id: str, handler: str, params: Any = None, attempt: int = 1,
                       timeout_ms: int | None = None, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps({
            "v": 1, "execution_id": execution_id, "job_id": "job-" + execution_id, "attempt": attempt,
            "handler": handler, "params": params, "scheduled_at": int(time.time() * 1000), "timeout_ms": timeout_ms,
        }).encode()
        ch = await self.conn.channel()
        exchange = await ch.get_exchange(f"{self.ns}.dispatch")
        await exchange.publish(aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT), routing_key=WID)
        await ch.close()

    async def take(self, queue: str, what: str, match: Any = lambda m: True, timeout: float = 15.0) -> dict[str, Any]:
        """The next message of `<ns>.<queue>` for which `match` holds
        (others are dropped), or a failure after `timeout`."""
        deadline = time.monotonic() + timeout
        ch = await self.conn.channel()
        try:
            q = await ch.get_queue(f"{self.ns}.{queue}", ensure=False)
            while time.monotonic() < deadline:
                try:
                    msg = await q.get(no_ack=True, fail=False)
                except aiormq.exceptions.ChannelNotFoundEntity:
                    # The worker has not declared the queue yet (this closed the channel).
                    await asyncio.sleep(0.05)
                    ch = await self.conn.channel()
                    q = await ch.get_queue(f"{self.ns}.{queue}", ensure=False)
                    continue
                if msg is None:
                    await asyncio.sleep(0.02)
                    continue
                value = {"raw": msg.body} if queue == "reroute" else json.loads(msg.body)
                self.seen.setdefault(queue, []).append(value)
                if match(value):
                    return dict(value)
            raise AssertionError(f"no {what} in {self.ns}.{queue} within {timeout} s")
        finally:
            if not ch.is_closed:
                await ch.close()

    async def drain(self, queue: str) -> list[dict[str, Any]]:
        """Takes everything left in `<ns>.<queue>`; returns all seen so far."""
        ch = await self.conn.channel()
        q = await ch.get_queue(f"{self.ns}.{queue}", ensure=False)
        while (m := await q.get(no_ack=True, fail=False)) is not None:
            self.seen.setdefault(queue, []).append(json.loads(m.body))
        await ch.close()
        return self.seen.get(queue, [])

    async def result(self, execution_id: str, kind: str | None = None, timeout: float = 15.0) -> dict[str, Any]:
        return await self.take(
            "results", f"{kind or 'a'} result for {execution_id}",
            lambda m: m["execution_id"] == execution_id and (kind is None or m["kind"] == kind), timeout,
        )

    async def heartbeat(self, what: str, match: Any) -> dict[str, Any]:
        return await self.take("heartbeats", what, match)


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    ns = unique("pywire")
    conn = await aio_pika.connect(AMQP_URL)
    rds = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    w = Wire(conn, rds, ns)
    try:
        yield w
    finally:
        if w.proc is not None and w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()
        await conn.close()
        keys = [k async for k in rds.scan_iter(match=f"{ns}:*")]
        if keys:
            await rds.delete(*keys)
        await rds.aclose()
        await asyncio.to_thread(_delete_amqp_names, ns, {WID})


async def test_messages_carry_the_protocol_additions_and_a_full_worker_refuses(wire: Wire) -> None:
    wire.start_worker(KAIROS_WORKER_CAPACITY="1", KAIROS_WORKER_BUFFER="0", KAIROS_WORKER_GROUP="gpu")
    hb = await wire.heartbeat("a first heartbeat", lambda m: m["worker_id"] == WID)
    assert hb["v"] == 1 and hb["state"] == "online"
    assert hb["queue"] == f"{wire.ns}.worker.{WID}"
    assert (hb["capacity"], hb["active"], hb["held"], hb["group"]) == (1, 0, [], "gpu")
    assert hb["handlers"] == [
        "chatty", "echo", "fail", "fan-in", "flaky", "reject", "shard", "sleep", "sleep-sync",
    ]
    assert re.fullmatch(r"[0-9a-f]{32}", hb["incarnation"])
    assert 0 <= hb["cpu_idle"] <= 100

    e1 = f"e1-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(e1, "sleep", {"ms": 1500})
    started = await wire.result(e1)
    assert started["kind"] == "started", "`started` comes first"
    assert (started["worker_id"], started["attempt"], started["incarnation"]) == (WID, 1, hb["incarnation"])
    owner = await wire.redis.get(f"{wire.ns}:attempt:{e1}:1")
    assert isinstance(owner, str) and re.fullmatch(rf"\S+ {WID} [0-9a-f]{{32}}", owner), owner
    busy = await wire.heartbeat("a heartbeat with the attempt held", lambda m: m["held"])
    assert busy["held"] == [{"execution_id": e1, "attempt": 1}] and busy["active"] == 1

    # Capacity 1, buffer 0: the next dispatch is refused and dead-letters to reroute.
    e2 = f"e2-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(e2, "echo", {"x": 1})
    rerouted = await wire.take("reroute", "the refused dispatch")
    assert json.loads(rerouted["raw"])["execution_id"] == e2

    done = await wire.result(e1, "succeeded")
    assert done["output"] == {"slept_ms": 1500, "worker": WID}
    assert done["incarnation"] == hb["incarnation"] and done["error"] is None
    assert done["at"] >= started["at"]

    # Its log lines and progress were shipped, in order, before the result.
    lines: list[dict[str, Any]] = []
    progress = None
    while not any(ln["message"] == "done" for ln in lines):
        batch = await wire.take("logs", f"log lines of {e1}", lambda m: m["execution_id"] == e1)
        assert (batch["v"], batch["attempt"], batch["worker_id"]) == (1, 1, WID)
        lines += batch["lines"]
        progress = batch.get("progress", progress)
    assert [ln["message"] for ln in lines] == ["sleeping 1500 ms", "done"]
    assert all(ln["level"] == "info" and isinstance(ln["at"], int) for ln in lines)
    assert progress == 100.0

    # A redelivered attempt is acked and skipped; a malformed dispatch is
    # dead-lettered. The echo behind them shows both were dealt with (one
    # dispatch at a time: prefetch is buffer + 1 = 1).
    results_before = len(wire.seen["results"])
    await wire.dispatch(e1, "sleep", {"ms": 1500})
    await wire.dispatch("", "", raw=b"{not json")
    e3 = f"e3-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(e3, "echo", {"y": 2})
    assert (await wire.take("reroute", "the malformed dispatch"))["raw"] == b"{not json"
    assert (await wire.result(e3, "succeeded"))["output"]["params"] == {"y": 2}
    since = (await wire.drain("results"))[results_before:]
    assert [m["execution_id"] for m in since] == [e3, e3], f"the duplicate of e1 ran again: {since}"

    # Shutdown: draining, then offline with nothing held.
    assert wire.proc is not None
    wire.proc.send_signal(signal.SIGTERM)
    await wire.heartbeat("a draining heartbeat", lambda m: m["state"] == "draining")
    last = await wire.heartbeat("an offline heartbeat", lambda m: m["state"] == "offline")
    assert last["held"] == [] and last["active"] == 0
    assert await asyncio.to_thread(wire.proc.wait, 10) == 0


async def test_a_stop_key_stops_the_handler_and_a_timeout_times_it_out(wire: Wire) -> None:
    wire.start_worker(KAIROS_WORKER_CAPACITY="2")
    await wire.heartbeat("a first heartbeat", lambda m: m["worker_id"] == WID)
    e1, e2 = f"stop-{uuid.uuid4().hex[:8]}", f"late-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(e1, "sleep", {"ms": 60000})
    await wire.dispatch(e2, "sleep-sync", {"ms": 60000}, timeout_ms=300)
    await wire.result(e1, "started")
    await wire.redis.set(f"{wire.ns}:stop:{e1}:1", "1", px=60000)
    stopped = await wire.result(e1, "failed", timeout=5)
    assert stopped["error"] == "stopped at the scheduler's request"
    late = await wire.result(e2, "timed_out", timeout=5)
    assert late["error"] == "handler exceeded its timeout of 300 ms"


async def test_a_stop_posted_before_the_attempt_starts_means_it_never_runs(wire: Wire) -> None:
    # In process rather than examples/worker.py, so the test can count the
    # handler's calls. Capacity 1, buffer 0: one dispatch at a time (prefetch
    # 1), so the control below arrives only once the stopped one is settled.
    worker = Worker(AMQP_URL, REDIS_URL, WID, wire.ns, capacity=1, buffer=0, heartbeat_ms=200)
    calls: list[str] = []

    @worker.handler("count")
    async def count(ctx: JobContext, params: Any) -> int:
        calls.append(ctx.execution_id)
        return len(calls)

    shutdown = asyncio.Event()
    serving = asyncio.create_task(worker.serve(shutdown))
    try:
        await wire.heartbeat("a first heartbeat", lambda m: m["worker_id"] == WID)
        stopped, control = f"cancelled-{uuid.uuid4().hex[:8]}", f"control-{uuid.uuid4().hex[:8]}"
        # The job was cancelled while its dispatch waited: the stop is posted first.
        await wire.redis.set(f"{wire.ns}:stop:{stopped}:1", "1", px=60000)
        await wire.dispatch(stopped, "count")
        await wire.dispatch(control, "count")

        failed = await wire.result(stopped)
        assert (failed["kind"], failed["error"]) == ("failed", STOPPED_ERROR), "no `started` comes first"
        assert (failed["worker_id"], failed["attempt"], failed["incarnation"]) == (WID, 1, worker.incarnation)
        assert (await wire.result(control, "succeeded"))["output"] == 1
        assert calls == [control], "the stopped attempt's handler ran"
        # Only its `failed` was reported; it was acked, not handed back, and
        # keeps its attempt key so a redelivery would be skipped.
        results = await wire.drain("results")
        assert [m["kind"] for m in results if m["execution_id"] == stopped] == ["failed"]
        owner = await wire.redis.get(f"{wire.ns}:attempt:{stopped}:1")
        assert isinstance(owner, str) and owner.split()[1:] == [WID, worker.incarnation], owner
        ch = await wire.conn.channel()
        q = await ch.declare_queue(f"{wire.ns}.worker.{WID}", passive=True)
        assert q.declaration_result.message_count == 0
        await ch.close()
    finally:
        shutdown.set()
        await asyncio.wait_for(serving, 15)


def _rabbit_connection_pid(name: str) -> str | None:
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"],
        capture_output=True, text=True, check=True,
    ).stdout
    for line in out.splitlines():
        if f'{{"connection_name","{name}"}}' in line:
            return line.split("\t", 1)[0]
    return None


async def test_the_worker_recovers_when_rabbitmq_and_redis_drop_it(wire: Wire) -> None:
    wire.start_worker()
    await wire.heartbeat("a first heartbeat", lambda m: m["worker_id"] == WID)
    e0 = f"before-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(e0, "echo")
    await wire.result(e0, "succeeded")

    # RabbitMQ closes the worker's connection: it reconnects and consumes again.
    pid = await asyncio.to_thread(_rabbit_connection_pid, f"kairos-worker {WID}")
    assert pid is not None, "the worker's connection is not named"
    await asyncio.to_thread(
        subprocess.run, ["rabbitmqctl", "-q", "close_connection", pid, "test"], check=True, capture_output=True
    )
    # Redis drops its connections too.
    for client in await wire.redis.client_list():
        if client.get("name") == f"kairos-worker:{WID}":
            await wire.redis.client_kill_filter(_id=client["id"])

    e1 = f"after-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(e1, "echo", {"z": 3})
    done = await wire.result(e1, "succeeded", timeout=20)
    assert done["output"]["params"] == {"z": 3}
    hb = await wire.heartbeat("a heartbeat after reconnecting", lambda m: m["state"] == "online")
    assert hb["worker_id"] == WID


async def test_a_dispatch_waiting_for_a_slot_goes_back_to_the_queue_on_shutdown(wire: Wire) -> None:
    wire.start_worker(KAIROS_WORKER_CAPACITY="1", KAIROS_WORKER_BUFFER="1", KAIROS_WORKER_GRACE_MS="300")
    await wire.heartbeat("a first heartbeat", lambda m: m["worker_id"] == WID)
    running, waiting = f"run-{uuid.uuid4().hex[:8]}", f"wait-{uuid.uuid4().hex[:8]}"
    await wire.dispatch(running, "sleep", {"ms": 60000})
    await wire.result(running, "started")
    await wire.dispatch(waiting, "echo")
    both = await wire.heartbeat("a heartbeat holding both", lambda m: len(m["held"]) == 2)
    assert both["held"] == [{"execution_id": e, "attempt": 1} for e in sorted([running, waiting])]
    assert both["active"] == 1, "the buffered dispatch is held but not running"

    assert wire.proc is not None
    wire.proc.send_signal(signal.SIGTERM)
    failed = await wire.result(running, "failed")
    assert failed["error"] == "worker shut down before the handler finished"
    assert await asyncio.to_thread(wire.proc.wait, 10) == 0
    # The buffered one never started, kept no attempt key, and is back in the queue.
    assert not [m for m in await wire.drain("results") if m["execution_id"] == waiting]
    assert await wire.redis.get(f"{wire.ns}:attempt:{waiting}:1") is None
    ch = await wire.conn.channel()
    q = await ch.declare_queue(f"{wire.ns}.worker.{WID}", passive=True)
    assert q.declaration_result.message_count == 1
    back = await q.get(no_ack=True)
    assert json.loads(back.body)["execution_id"] == waiting
    await ch.close()
