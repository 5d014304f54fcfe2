"""The RabbitMQ link: one connection, (re)opened on demand, with the topology
declared on every connect and a confirm channel for publishing.

Publishing goes through `publish`, which raises on any failure (no confirm,
nack, unroutable, connection gone); callers decide how often to retry. The
consumer opens its own channel from `connection()` so that closing it hands
the unstarted dispatches back without touching the publishing channel.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractQueue

from .protocol import HEARTBEAT_TTL_MS, Names

log = logging.getLogger("kairos_worker.amqp")

#: Levels of a worker queue's priority: the dispatcher's delivery ranks,
#: 2 x priority (0-9) + 1 for immediate work.
DELIVERY_RANKS = 19

#: Bound on connecting, declaring and waiting for one confirm.
OP_TIMEOUT = 5.0


class Link:
    def __init__(self, url: str, names: Names, connection_name: str) -> None:
        self._url = url
        # Shown by RabbitMQ's management UI and `rabbitmqctl list_connections`.
        self._client_properties: dict[str, Any] = {"connection_name": connection_name}
        self._names = names
        self._conn: AbstractConnection | None = None
        self._publish_ch: AbstractChannel | None = None
        self._lock = asyncio.Lock()

    async def connection(self) -> AbstractConnection:
        """The open connection, reconnecting (once, bounded) if it closed."""
        async with self._lock:
            if self._conn is not None and _usable(self._conn):
                return self._conn
            if self._conn is not None:
                stale, self._conn = self._conn, None
                asyncio.ensure_future(_close_quietly(stale))
            self._publish_ch = None
            conn = await aio_pika.connect(self._url, timeout=OP_TIMEOUT, client_properties=self._client_properties)
            try:
                await self._declare_topology(conn)
            except BaseException:
                await conn.close()
                raise
            self._conn = conn
            return conn

    async def _declare_topology(self, conn: AbstractConnection) -> None:
        """Declares what dispatchers declare, with identical arguments, so the
        worker can start first (its queue binds to the dispatch exchange) and
        results are never published to a queue that does not exist yet. A
        different argument would make RabbitMQ close the channel
        (PRECONDITION_FAILED), hence a throwaway channel."""
        n = self._names
        ch = await conn.channel(publisher_confirms=False)
        try:
            await ch.declare_exchange(n.dispatch_exchange, aio_pika.ExchangeType.DIRECT, durable=True, timeout=OP_TIMEOUT)
            reroute = await ch.declare_exchange(n.reroute_exchange, aio_pika.ExchangeType.FANOUT, durable=True, timeout=OP_TIMEOUT)
            reroute_q = await ch.declare_queue(n.reroute_queue, durable=True, timeout=OP_TIMEOUT)
            await reroute_q.bind(reroute, routing_key="", timeout=OP_TIMEOUT)
            await ch.declare_queue(n.results_queue, durable=True, timeout=OP_TIMEOUT)
            await ch.declare_queue(
                n.heartbeats_queue,
                durable=True,
                arguments={"x-message-ttl": HEARTBEAT_TTL_MS},
                timeout=OP_TIMEOUT,
            )
            await ch.declare_queue(n.logs_queue, durable=True, timeout=OP_TIMEOUT)
        finally:
            if not ch.is_closed:
                await ch.close()

    async def declare_worker_queue(self, ch: AbstractChannel, worker_id: str) -> AbstractQueue:
        """The worker's own queue: rejected dispatches dead-letter to the
        reroute exchange; bound to the dispatch exchange by the worker id."""
        # A priority queue with one level per delivery rank (2 x priority +
        # immediate, as the Rust dispatcher and worker declare it). A queue
        # declared earlier keeps its arguments: the older shapes are tried
        # next. The shapes are tried on a scratch channel (a failed declare
        # closes it), so `ch` (its QoS set by the caller) stays open.
        name = self._names.worker_queue(worker_id)
        dlx = {"x-dead-letter-exchange": self._names.reroute_exchange}
        shapes = [{**dlx, "x-max-priority": DELIVERY_RANKS}, {**dlx, "x-max-priority": 9}, dlx]
        conn = await self.connection()
        arguments = shapes[-1]
        for i, shape in enumerate(shapes):
            scratch = await conn.channel(publisher_confirms=False)
            try:
                await scratch.declare_queue(name, durable=True, arguments=shape, timeout=OP_TIMEOUT)
            except aio_pika.exceptions.ChannelPreconditionFailed:
                continue
            finally:
                if not scratch.is_closed:
                    await scratch.close()
            if i > 0:
                log.warning(
                    "worker queue predates the current delivery ranks; delete it "
                    "(with the worker stopped) to serve immediate work first"
                )
            arguments = shape
            break
        q = await ch.declare_queue(name, durable=True, arguments=arguments, timeout=OP_TIMEOUT)
        await q.bind(self._names.dispatch_exchange, routing_key=worker_id, timeout=OP_TIMEOUT)
        return q

    async def _channel(self) -> AbstractChannel:
        conn = await self.connection()
        ch = self._publish_ch
        if ch is None or ch.is_closed:
            # on_return_raises: an unroutable message fails instead of being
            # confirmed and silently dropped.
            ch = await conn.channel(publisher_confirms=True, on_return_raises=True)
            self._publish_ch = ch
        return ch

    async def publish(self, routing_key: str, body: bytes, *, persistent: bool) -> None:
        """Publishes through the default exchange and waits for the confirm."""
        ch = await self._channel()
        message = aio_pika.Message(
            body,
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT if persistent else aio_pika.DeliveryMode.NOT_PERSISTENT,
        )
        try:
            await ch.default_exchange.publish(message, routing_key=routing_key, mandatory=True, timeout=OP_TIMEOUT)
        except BaseException:
            # The channel may be unusable (timed-out confirm, closed link): the
            # next call opens a fresh one.
            if self._publish_ch is ch:
                self._publish_ch = None
                if not ch.is_closed:
                    asyncio.ensure_future(_close_quietly(ch))
            raise

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn, self._publish_ch = self._conn, None, None
        if conn is not None and not conn.is_closed:
            await _close_quietly(conn)


def _usable(conn: AbstractConnection) -> bool:
    """Open as far as we know. A connection the broker closed is not marked
    `is_closed` by aio-pika (that means "closed by us"); it loses `connected`."""
    connected = getattr(conn, "connected", None)
    return not conn.is_closed and (connected is None or connected.is_set())


async def _close_quietly(thing: AbstractChannel | AbstractConnection) -> None:
    try:
        await asyncio.wait_for(thing.close(), OP_TIMEOUT)
    except Exception:  # noqa: BLE001 - it is being discarded either way
        pass
