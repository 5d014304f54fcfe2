"""The worker: handler registration (the decorator API) and the running
process — the delivery loop, the heartbeat loop, the stop watcher, the log
shipper, and graceful shutdown.

Each dispatch goes: place (or reject for reroute) → pool slot → attempt key →
`started` confirmed → ack → handler → final result confirmed. A dispatch
waiting for a slot stays unacked, so if the worker stops or dies before
starting it, the broker hands it back to the queue. One whose stop was posted
before it started (the job was cancelled while it waited) never runs: it is
reported `failed` with STOPPED_ERROR, without `started`, then acked.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import signal
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable, TypeVar
from urllib.parse import urlsplit, urlunsplit

from aio_pika.abc import AbstractIncomingMessage

from .amqp import OP_TIMEOUT, Link
from .config import ConfigError, WorkerConfig, resolve
from .context import JobContext
from .execute import Handler, Report, run_attempt
from .guard import Guard
from .load import CpuSampler
from .logship import LogShipper
from .protocol import (
    STOPPED_ERROR,
    Dispatch,
    Load,
    MalformedDispatch,
    Names,
    ResultKind,
    decode_dispatch,
    encode,
    heartbeat_message,
    result_message,
)
from .state import Shared

log = logging.getLogger("kairos_worker")

#: How long a full worker waits for a place before refusing a dispatch.
FULL_WAIT = 0.1
#: Pause before handing a dispatch back when Redis is down, so the redelivery does not spin.
GUARD_RETRY_DELAY = 1.0
RECONNECT_MIN = 0.1
RECONNECT_MAX = 5.0
#: `started` is retried only briefly: until it is confirmed the handler does
#: not run, and the attempt is better handed back than held while this
#: worker may be declared dead.
STARTED_TRIES, STARTED_MAX_DELAY, STARTED_WITHIN = 6, 1.0, 5.0
#: Final results retry across a broker restart (minutes), then give up so a
#: shutdown cannot hang forever; the reaper then recovers the attempt.
RESULT_TRIES, RESULT_MAX_DELAY = 40, 5.0

F = TypeVar("F", bound=Callable[..., Any])


class StartupError(RuntimeError):
    """RabbitMQ or Redis could not be reached when the worker started."""


def mask_password(url: str) -> str:
    """`url` with its password replaced by `***`, for error messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[-1]}"))


@dataclass
class _Generation:
    """One consumer channel's life. When it ends, dispatches still waiting
    for a slot give up: closing the channel handed them back to the queue."""

    ended: asyncio.Event = field(default_factory=asyncio.Event)


async def _settle(action: Awaitable[Any], what: str) -> None:
    try:
        await asyncio.wait_for(action, OP_TIMEOUT)
    except Exception as e:  # noqa: BLE001 - the broker redelivers what it did not get
        log.warning("%s failed: %s; the broker will redeliver the dispatch", what, e)


async def _first(*aws: Awaitable[Any], timeout: float | None = None) -> None:
    """Waits until the first of `aws` completes (or `timeout`), cancelling the rest."""
    futures = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futures, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in futures:
            f.cancel()


class Worker:
    """A Kairos worker. Register handlers with `@worker.handler("name")`,
    then `worker.run()` (blocking, handles SIGTERM/SIGINT) or
    `await worker.serve(shutdown_event)`.

    Arguments left as None come from `KAIROS_*` environment variables (see
    the README), then the defaults of `kairos worker`.
    """

    def __init__(
        self,
        amqp_url: str | None = None,
        redis_url: str | None = None,
        worker_id: str | None = None,
        namespace: str | None = None,
        capacity: int | None = None,
        group: str | None = None,
        *,
        buffer: int | None = None,
        heartbeat_ms: int | None = None,
        grace_ms: int | None = None,
        stop_poll_ms: int | None = None,
    ) -> None:
        self.config: WorkerConfig = resolve(
            amqp_url=amqp_url,
            redis_url=redis_url,
            worker_id=worker_id,
            namespace=namespace,
            capacity=capacity,
            buffer=buffer,
            group=group,
            heartbeat_ms=heartbeat_ms,
            grace_ms=grace_ms,
            stop_poll_ms=stop_poll_ms,
        )
        self.names = Names(self.config.namespace)
        self._handlers: dict[str, Handler] = {}
        #: Fresh for every start, so dispatchers can tell a restart from a
        #: worker that kept running; set by `serve`.
        self.incarnation: str | None = None
        self._shared: Shared | None = None

    @property
    def worker_id(self) -> str:
        return self.config.worker_id

    def handler(self, name: str) -> Callable[[F], F]:
        """Registers the decorated function as the handler `name`. It is
        called as `fn(ctx, params)`; `async def` runs on the event loop, a
        plain function in a thread. A later registration of a name wins."""

        def register(fn: F) -> F:
            self.add_handler(name, fn)
            return fn

        return register

    def add_handler(self, name: str, fn: Handler) -> None:
        if not name:
            raise ConfigError("a handler name must not be empty")
        self._handlers[name] = fn

    # -- running ---------------------------------------------------------

    def run(self) -> None:
        """Runs until SIGTERM or SIGINT, then shuts down gracefully; a second
        signal ends the grace period at once. Exits with status 1 and one line
        naming the service if RabbitMQ or Redis cannot be reached at start."""
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        try:
            asyncio.run(self._run_with_signals())
        except StartupError as e:
            raise SystemExit(f"kairos worker {self.worker_id}: {e}") from None

    async def _run_with_signals(self) -> None:
        shutdown = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            if not shutdown.is_set():
                log.info("%s: shutting down (grace %d ms)", sig.name, self.config.grace_ms)
                shutdown.set()
            elif self._shared is not None:
                log.warning("%s again: ending the grace period now", sig.name)
                self._shared.hard_stop.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        try:
            await self.serve(shutdown)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    async def serve(self, shutdown: asyncio.Event) -> None:
        """Consumes until `shutdown` is set, then drains: stops consuming
        (dispatches not started go back to the queue), heartbeats `draining`,
        gives running handlers the grace period, reports the ones still
        running as failed, heartbeats `offline`."""
        if not self._handlers:
            raise ConfigError("no handlers registered")
        cfg = self.config
        incarnation = self.incarnation = uuid.uuid4().hex
        shared = self._shared = Shared(cfg.capacity, cfg.buffer)
        link = Link(cfg.amqp_url, self.names, f"kairos-worker {cfg.worker_id}")
        guard = Guard(cfg.redis_url, cfg.worker_id, incarnation)
        try:
            await self._check_services(link, guard)
            run = _Running(self, shared, link, guard)
            await run.serve(shutdown)
        finally:
            await link.close()
            await guard.close()

    async def _check_services(self, link: Link, guard: Guard) -> None:
        cfg = self.config
        try:
            conn = await link.connection()
            ch = await conn.channel(publisher_confirms=False)
            await link.declare_worker_queue(ch, cfg.worker_id)
            await ch.close()
        except Exception as e:  # noqa: BLE001 - reported as one line naming the service
            raise StartupError(f"cannot reach RabbitMQ at {mask_password(cfg.amqp_url)}: {e}") from e
        try:
            await guard.ping()
        except Exception as e:  # noqa: BLE001
            raise StartupError(f"cannot reach Redis at {mask_password(cfg.redis_url)}: {e}") from e


class _Running:
    """One `serve` call's tasks and what they share."""

    def __init__(self, worker: Worker, shared: Shared, link: Link, guard: Guard) -> None:
        self.cfg = worker.config
        self.names = worker.names
        self.handlers = dict(worker._handlers)
        self.incarnation = worker.incarnation or uuid.uuid4().hex
        self.shared = shared
        self.link = link
        self.guard = guard
        self._cpu = CpuSampler()
        self._beat_lock = asyncio.Lock()
        self._beat_failing = False
        self.logs = LogShipper(
            self.cfg.worker_id,
            lambda body: link.publish(self.names.logs_queue, body, persistent=False),
        )

    @property
    def wid(self) -> str:
        return self.cfg.worker_id

    async def serve(self, shutdown: asyncio.Event) -> None:
        shared, cfg = self.shared, self.cfg
        log.info(
            "worker %s started (capacity %d, buffer %d, handlers: %s, incarnation %s)",
            self.wid, cfg.capacity, cfg.buffer, ", ".join(sorted(self.handlers)), self.incarnation,
        )
        loops_stop = asyncio.Event()
        loops = [
            asyncio.create_task(self._heartbeats(loops_stop), name="heartbeats"),
            asyncio.create_task(self._stop_watcher(loops_stop), name="stop-watcher"),
            asyncio.create_task(self.logs.run(loops_stop), name="log-shipper"),
        ]
        try:
            await self._consume(shutdown)
            shared.set_state("draining")
            await self._beat()
            pending = set(shared.tasks)
            log.info("worker %s draining: %d in flight, grace %d ms", self.wid, len(pending), cfg.grace_ms)
            if pending:
                _, pending = await asyncio.wait(pending, timeout=cfg.grace_ms / 1000)
            if pending:
                log.warning(
                    "grace period over; stopping %d handlers still running and reporting them failed",
                    len(pending),
                )
                shared.hard_stop.set()
                await asyncio.wait(pending)
        finally:
            shared.hard_stop.set()
            if shared.tasks:
                await asyncio.wait(set(shared.tasks))
            loops_stop.set()
            for task in loops:
                try:
                    await task
                except Exception:  # noqa: BLE001 - shutting down regardless
                    log.exception("worker task %s failed", task.get_name())
            shared.set_state("offline")
            await self._beat()
            log.info("worker %s stopped", self.wid)

    # -- delivery loop ---------------------------------------------------

    async def _consume(self, shutdown: asyncio.Event) -> None:
        """Consumes until `shutdown`; a consumer that ends or fails to start
        is restarted with capped backoff."""
        backoff = RECONNECT_MIN
        while not shutdown.is_set():
            gen = _Generation()
            consumed = False
            try:
                consumed = await self._consume_once(gen, shutdown)
                if not shutdown.is_set():
                    log.warning("dispatch consumer ended (broker restart or channel closed); consuming again")
            except Exception as e:  # noqa: BLE001 - any broker failure is retried
                log.warning("cannot consume the worker queue: %s; retrying in %.1f s", e, backoff)
            finally:
                gen.ended.set()
            if shutdown.is_set():
                return
            if consumed:
                backoff = RECONNECT_MIN
            await _first(shutdown.wait(), timeout=backoff)
            backoff = min(backoff * 2, RECONNECT_MAX)

    async def _consume_once(self, gen: _Generation, shutdown: asyncio.Event) -> bool:
        """One consumer channel. Returns True if consuming got going."""
        conn = await self.link.connection()
        ch = await conn.channel(publisher_confirms=False)
        try:
            # Running attempts are acked already, so unacked deliveries are
            # those waiting for a slot: the buffer, plus one surplus to refuse
            # when full; the rest wait in the queue (see the protocol doc).
            await ch.set_qos(prefetch_count=self.cfg.buffer + 1, timeout=OP_TIMEOUT)
            queue = await self.link.declare_worker_queue(ch, self.wid)
            inbox: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
            await queue.consume(inbox.put, no_ack=False, timeout=OP_TIMEOUT)
            closed = asyncio.ensure_future(ch.closed())
            stopping = asyncio.ensure_future(shutdown.wait())
            try:
                while True:
                    getter = asyncio.ensure_future(inbox.get())
                    await asyncio.wait([getter, closed, stopping], return_when=asyncio.FIRST_COMPLETED)
                    if not getter.done():
                        getter.cancel()
                    if stopping.done() or closed.done():
                        # A message taken but not accepted stays unsettled:
                        # the channel's close hands it back.
                        return True
                    await self._accept(getter.result(), gen)
            finally:
                closed.cancel()
                stopping.cancel()
        finally:
            gen.ended.set()
            if not ch.is_closed:
                try:
                    await asyncio.wait_for(ch.close(), OP_TIMEOUT)
                except Exception as e:  # noqa: BLE001 - the broker closes it with the connection
                    log.debug("closing the consumer channel: %s", e)

    async def _accept(self, msg: AbstractIncomingMessage, gen: _Generation) -> None:
        """Takes a delivery in, or refuses it when pool and buffer stay full
        for FULL_WAIT, so the dead-letter route sends it to another worker."""
        try:
            dispatch = decode_dispatch(msg.body)
        except MalformedDispatch as e:
            log.error("dropping a malformed dispatch: %s; body: %.200r", e, msg.body)
            await _settle(msg.reject(requeue=False), "rejecting a malformed dispatch")
            return
        if not await self.shared.places.take_within(FULL_WAIT, gen.ended):
            if gen.ended.is_set():
                return
            log.info("pool and buffer full; rejecting a dispatch for reroute")
            await _settle(msg.reject(requeue=False), "rejecting a dispatch for reroute")
            return
        task = asyncio.create_task(self._process(msg, dispatch, gen))
        self.shared.tasks.add(task)
        task.add_done_callback(self.shared.tasks.discard)

    async def _process(self, msg: AbstractIncomingMessage, d: Dispatch, gen: _Generation) -> None:
        shared = self.shared
        try:
            with shared.holding(d.key):
                await self._take_slot_and_run(msg, d, gen)
        finally:
            shared.places.give_back()

    async def _take_slot_and_run(self, msg: AbstractIncomingMessage, d: Dispatch, gen: _Generation) -> None:
        shared = self.shared
        acquire = asyncio.ensure_future(shared.slots.acquire())
        ended = asyncio.ensure_future(gen.ended.wait())
        await asyncio.wait([acquire, ended], return_when=asyncio.FIRST_COMPLETED)
        ended.cancel()
        if gen.ended.is_set():
            # Not started: left unsettled, the closed channel hands it back.
            if acquire.done() and not acquire.cancelled():
                shared.slots.release()
            else:
                acquire.cancel()
            return
        shared.active += 1
        try:
            report = await self._start_and_run(msg, d)
        finally:
            shared.active -= 1
            shared.slots.release()
        if report is None:
            return
        # Lines the handler logged go out before its outcome (best effort).
        try:
            await asyncio.wait_for(self.logs.flush(), OP_TIMEOUT)
        except Exception:  # noqa: BLE001 - logs never hold up a result
            pass
        await self._publish_result(
            d, report.kind, report.output, report.error, RESULT_TRIES, RESULT_MAX_DELAY, retryable=report.retryable
        )

    async def _start_and_run(self, msg: AbstractIncomingMessage, d: Dispatch) -> Report | None:
        """Attempt key and stop lookup → `started` → ack → handler. None when
        the attempt is not run here (ran elsewhere, stopped before it
        started, or handed back)."""
        key = self.names.attempt_key(d.execution_id, d.attempt)
        try:
            # The stop is asked concurrently with the attempt key: one more
            # command, no added wait. `_stop_posted` never raises, so a failing
            # take is handled exactly as on its own.
            claim, stopped = await asyncio.gather(self.guard.take(key), self._stop_posted(d))
        except Exception as e:  # noqa: BLE001 - never run without the key
            log.warning("cannot take the attempt key %s: %s; handing the dispatch back", key, e)
            await asyncio.sleep(GUARD_RETRY_DELAY)
            await _settle(msg.reject(requeue=True), "requeueing a dispatch")
            return None
        if claim is None:
            log.info("attempt %s:%d already ran or is running; skipping the duplicate", d.execution_id, d.attempt)
            await _settle(msg.ack(), "acking a duplicate dispatch")
            return None
        if stopped:
            await self._settle_stopped(msg, d, key, claim)
            return None
        started = await self._publish_result(d, "started", None, None, STARTED_TRIES, STARTED_MAX_DELAY, within=STARTED_WITHIN)
        if not started:
            # Without a confirmed `started` the dispatcher may requeue the
            # attempt and another worker run it: it does not run here.
            await self._hand_back(msg, key, claim, "`started`")
            return None
        # Acked before the handler runs: a long job must not hold an unacked
        # dispatch (RabbitMQ closes the channel after its consumer ack timeout).
        try:
            await asyncio.wait_for(msg.ack(), OP_TIMEOUT)
        except Exception as e:  # noqa: BLE001
            log.warning("acking %s failed: %s; a redelivery will be skipped by the attempt key", key, e)
        return await self._run(d)

    async def _stop_posted(self, d: Dispatch) -> bool:
        """Whether a stop was posted for this attempt before it started. A
        lookup that fails counts as no stop: once the handler runs, the stop
        watcher looks again and stops it then."""
        try:
            posted = await self.guard.stops_posted([self.names.stop_key(d.execution_id, d.attempt)])
        except Exception as e:  # noqa: BLE001 - the stop watcher catches a stop we miss here
            log.debug("cannot look up the stop of %s:%d before starting it: %s", d.execution_id, d.attempt, e)
            return False
        return posted == [True]

    async def _settle_stopped(self, msg: AbstractIncomingMessage, d: Dispatch, key: str, claim: str) -> None:
        """Ends an attempt stopped before it started: its handler never runs
        and the dispatcher records it `cancelled`. The dispatch is acked once
        the result is confirmed; if it cannot be, the attempt goes back to
        the queue (and is settled the same way when it comes back)."""
        log.info("a stop was requested before attempt %s:%d started; not running it", d.execution_id, d.attempt)
        if not await self._publish_result(d, "failed", None, STOPPED_ERROR, RESULT_TRIES, RESULT_MAX_DELAY):
            await self._hand_back(msg, key, claim, "the stopped attempt's result")
            return
        try:
            await asyncio.wait_for(msg.ack(), OP_TIMEOUT)
        except Exception as e:  # noqa: BLE001
            log.warning("acking stopped %s failed: %s; a redelivery will be skipped by the attempt key", key, e)

    async def _hand_back(self, msg: AbstractIncomingMessage, key: str, claim: str, what: str) -> None:
        """Gives back an attempt taken but not started, because `what` could
        not be confirmed: releases its key if it still holds our claim, and
        requeues the dispatch."""
        try:
            await self.guard.release(key, claim)
            log.warning("%s of %s could not be confirmed; handing the attempt back", what, key)
        except Exception as e:  # noqa: BLE001 - the reaper releases it if we are declared dead
            log.error("%s of %s unconfirmed and its key not released: %s", what, key, e)
        await _settle(msg.reject(requeue=True), "requeueing a dispatch")

    async def _run(self, d: Dispatch) -> Report:
        fn = self.handlers.get(d.handler)
        if fn is None:
            names = ", ".join(sorted(self.handlers))
            # Worded as the stock worker words it (a JSON-quoted name).
            return Report("failed", error=f"unknown handler {json.dumps(d.handler)}; this worker runs: {names}")
        deadline = None
        if d.timeout_ms is not None:
            deadline = datetime.now(timezone.utc) + timedelta(milliseconds=d.timeout_ms)
        ctx = JobContext(
            execution_id=d.execution_id,
            job_id=d.job_id,
            attempt=d.attempt,
            handler=d.handler,
            worker_id=self.wid,
            scheduled_at_ms=d.scheduled_at,
            timeout_ms=d.timeout_ms,
            deadline=deadline,
            _sink=self.logs,
            shard_index=d.shard_index,
            shard_count=d.shard_count,
            _parent_outputs=d.parent_outputs,
        )
        stop = asyncio.Event()
        with self.shared.tracking(self.names.stop_key(d.execution_id, d.attempt), stop):
            report, cost_ms = await run_attempt(fn, ctx, d.params, stop, self.shared.hard_stop)
        self.shared.costs.record(cost_ms)
        return report

    async def _publish_result(
        self,
        d: Dispatch,
        kind: ResultKind,
        output: Any,
        error: str | None,
        tries: int,
        max_delay: float,
        within: float | None = None,
        retryable: bool | None = None,
    ) -> bool:
        """Publishes a result and waits for its confirm, retrying with capped,
        jittered backoff; False if it never got confirmed."""
        body = encode(
            result_message(
                execution_id=d.execution_id,
                attempt=d.attempt,
                worker_id=self.wid,
                incarnation=self.incarnation,
                kind=kind,
                output=output,
                error=error,
                retryable=retryable,
            )
        )
        loop = asyncio.get_running_loop()
        give_up_at = None if within is None else loop.time() + within
        delay = 0.05
        for attempt in range(1, tries + 1):
            try:
                await self.link.publish(self.names.results_queue, body, persistent=True)
                return True
            except Exception as e:  # noqa: BLE001 - every broker failure is retried
                wait = random.uniform(delay, 2 * delay)
                out_of_time = give_up_at is not None and loop.time() + wait > give_up_at
                if attempt == tries or out_of_time:
                    log.error(
                        "RESULT NOT DELIVERED: gave up publishing %s of %s:%d after %d tries: %s",
                        kind, d.execution_id, d.attempt, attempt, e,
                    )
                    return False
                log.warning("publishing %s of %s:%d failed, retrying in %.2f s: %s", kind, d.execution_id, d.attempt, wait, e)
                await asyncio.sleep(wait)
                delay = min(delay * 2, max_delay)
        return False

    # -- background loops --------------------------------------------------

    async def _heartbeats(self, stop: asyncio.Event) -> None:
        """Beats at once, then every heartbeat period, until `stop`. State
        changes are beaten by `serve` itself, at the moment they happen."""
        period = self.cfg.heartbeat_ms / 1000
        while not stop.is_set():
            await self._beat()
            await _first(stop.wait(), timeout=period)

    async def _beat(self) -> None:
        """Publishes one heartbeat. Serialised, and the message is built under
        the lock, so a periodic beat can never overtake a state change with
        the older state."""
        async with self._beat_lock:
            body = encode(self._heartbeat(self._cpu))
            try:
                await asyncio.wait_for(
                    self.link.publish(self.names.heartbeats_queue, body, persistent=False),
                    2 * OP_TIMEOUT,
                )
                self._beat_failing = False
            except Exception as e:  # noqa: BLE001 - the next beat replaces a lost one
                if not self._beat_failing:
                    log.warning("heartbeat not published: %s", e)
                self._beat_failing = True

    def _heartbeat(self, cpu: CpuSampler) -> dict[str, Any]:
        s = self.shared
        return heartbeat_message(
            worker_id=self.wid,
            queue=self.names.worker_queue(self.wid),
            capacity=self.cfg.capacity,
            load=Load(active=s.active, avg_cost_ms=s.costs.mean(), cpu_idle=cpu.idle()),
            state=s.state,
            incarnation=self.incarnation,
            handlers=list(self.handlers),
            group=self.cfg.group,
            held=s.held_list(),
        )

    async def _stop_watcher(self, stop: asyncio.Event) -> None:
        """Looks up stop requests for the running attempts (one MGET per
        period, only while something runs) and stops those asked for."""
        period = self.cfg.stop_poll_ms / 1000
        failing = False
        while not stop.is_set():
            await _first(stop.wait(), timeout=period)
            keys = list(self.shared.running)
            if not keys or stop.is_set():
                continue
            try:
                posted = await self.guard.stops_posted(keys)
                failing = False
            except Exception as e:  # noqa: BLE001 - retried next period, logged once per outage
                if not failing:
                    log.warning("cannot look up stop requests: %s; retrying", e)
                failing = True
                continue
            for key, is_posted in zip(keys, posted):
                event = self.shared.running.get(key)
                if is_posted and event is not None and not event.is_set():
                    log.info("stopping %s at the scheduler's request", key)
                    event.set()
