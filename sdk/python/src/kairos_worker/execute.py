"""Runs one attempt's handler: async handlers as tasks on the loop, sync ones
in a thread of their own; stops it at its timeout, at a stop request, or when
the shutdown grace period ends; and says how it ended.

The outcome is decided first, and only then is the handler told (its
`ctx.cancelled`, and `CancelledError` for async handlers): a handler's own
"cancelled" failure must not win the race against the real reason.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

from .context import CancelReason, JobContext
from .errors import PermanentError, RetryableError
from .protocol import SHUTDOWN_ERROR, STOPPED_ERROR, ResultKind

log = logging.getLogger("kairos_worker.execute")

#: How long a cancelled handler gets to return on its own before it is left behind.
ABORT_WAIT = 1.0

#: Which reason counts when several fire at once (as in the stock worker).
_PRIORITY: tuple[CancelReason, ...] = ("timeout", "stop", "shutdown")

Handler = Callable[[JobContext, Any], Union[Any, Awaitable[Any]]]


@dataclass(frozen=True)
class Report:
    """What an attempt came to, before it becomes a result message."""

    kind: ResultKind
    output: Any = None
    error: str | None = None
    #: `False` on a failure no retry can fix (`PermanentError`); else unsaid.
    retryable: bool | None = None


def _in_thread(fn: Handler, ctx: JobContext, params: Any) -> asyncio.Future[Any]:
    """Runs a sync handler in a daemon thread (a stuck handler then cannot
    keep the process alive at exit) and returns a future for its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    run = contextvars.copy_context().run

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = run(fn, ctx, params), None
        except BaseException as e:  # noqa: BLE001 - handed to the loop as the outcome
            value, error = None, e
        try:
            loop.call_soon_threadsafe(settle, value, error)
        except RuntimeError:
            pass  # the loop is gone: the worker has already reported this attempt

    threading.Thread(target=target, name=f"kairos-{ctx.handler}-{ctx.execution_id}", daemon=True).start()
    return future


def start(fn: Handler, ctx: JobContext, params: Any) -> asyncio.Future[Any]:
    if inspect.iscoroutinefunction(fn):
        return asyncio.ensure_future(fn(ctx, params))
    return _in_thread(fn, ctx, params)


def outcome(future: asyncio.Future[Any]) -> Report:
    """The report for a handler that finished on its own."""
    if future.cancelled():
        return Report("failed", error="handler was cancelled")
    error = future.exception()
    if error is None:
        value = future.result()
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            return Report("failed", error=f"handler output is not JSON: {e}")
        return Report("succeeded", output=value)
    if isinstance(error, PermanentError):
        return Report("failed", error=str(error), retryable=False)
    if isinstance(error, RetryableError):
        return Report("failed", error=str(error))
    if not isinstance(error, Exception):
        # SystemExit, KeyboardInterrupt raised inside a handler: its failure.
        return Report("failed", error=f"{type(error).__name__}: {error}")
    log.warning("handler %s raised", type(error).__name__, exc_info=error)
    text = str(error)
    return Report("failed", error=f"{type(error).__name__}: {text}" if text else type(error).__name__)


async def run_attempt(
    fn: Handler,
    ctx: JobContext,
    params: Any,
    stop: asyncio.Event,
    hard_stop: asyncio.Event,
) -> tuple[Report, float]:
    """Runs the handler until it ends or is stopped; returns the report and
    the handler's duration in ms (for the cost window)."""
    started = time.monotonic()
    task = start(fn, ctx, params)
    waits: dict[asyncio.Future[Any], CancelReason] = {
        asyncio.ensure_future(stop.wait()): "stop",
        asyncio.ensure_future(hard_stop.wait()): "shutdown",
    }
    if ctx.timeout_ms is not None:
        waits[asyncio.ensure_future(asyncio.sleep(ctx.timeout_ms / 1000))] = "timeout"
    try:
        await asyncio.wait([task, *waits], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    if task.done():
        # Finished first (or at the same moment as a stop): its own outcome counts.
        report = outcome(task)
    else:
        fired = {waits[w] for w in waits if w.done() and not w.cancelled()}
        reason = next(r for r in _PRIORITY if r in fired)
        if reason == "timeout":
            report = Report("timed_out", error=f"handler exceeded its timeout of {ctx.timeout_ms} ms")
        elif reason == "stop":
            report = Report("failed", error=STOPPED_ERROR)
        else:
            report = Report("failed", error=SHUTDOWN_ERROR)
        await _wind_down(task, ctx, reason)
    return report, (time.monotonic() - started) * 1000


async def _wind_down(task: asyncio.Future[Any], ctx: JobContext, reason: CancelReason) -> None:
    """Tells the handler, and gives it ABORT_WAIT to clean up before its slot
    is reused. A thread cannot be killed: one that ignores `ctx.cancelled` is
    left running (and logged)."""
    ctx._cancel(reason)
    if isinstance(task, asyncio.Task):
        # Raises CancelledError at the handler's next await. A thread's
        # future is not cancelled: it settles when the thread returns.
        task.cancel()
    done, _ = await asyncio.wait([task], timeout=ABORT_WAIT)
    if not done:
        log.warning(
            "handler %r (execution %s) ignored cancellation (%s) for %.0f s; leaving it behind",
            ctx.handler, ctx.execution_id, reason, ABORT_WAIT,
        )
    elif not task.cancelled() and task.exception() is not None:
        task.exception()  # retrieved: its failure no longer matters
