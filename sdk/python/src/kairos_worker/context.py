"""What a handler sees of its attempt: ids, times, the cancellation signal,
and `log` / `progress`, which go to the log shipper.

Handlers run either on the event loop (async) or in a thread (sync), so the
cancellation signal is both an `asyncio.Event` (awaitable) and a
`threading.Event` (blocking wait); both are set on the loop's thread.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal, Protocol

from .protocol import check_level, check_progress

CancelReason = Literal["timeout", "stop", "shutdown"]


class LogSink(Protocol):
    def add_line(self, execution_id: str, attempt: int, level: str, message: str) -> None: ...
    def set_progress(self, execution_id: str, attempt: int, pct: float) -> None: ...


@dataclass
class JobContext:
    """One attempt, as handed to a handler."""

    execution_id: str
    job_id: str
    attempt: int
    handler: str
    worker_id: str
    #: Due time of the trigger, milliseconds since the epoch (UTC).
    scheduled_at_ms: int
    timeout_ms: int | None
    #: When the handler is stopped for its timeout (UTC), or None without one.
    deadline: datetime | None
    _sink: LogSink
    _loop_event: asyncio.Event = field(default_factory=asyncio.Event)
    _thread_event: threading.Event = field(default_factory=threading.Event)
    _reason: CancelReason | None = None
    #: This execution's part of a broadcast or sharded trigger (see `shard`).
    shard_index: int = 0
    shard_count: int = 1
    #: A workflow node's parents' outputs (see `parent_outputs()`).
    _parent_outputs: dict[str, Any] | None = None

    def parent_outputs(self) -> dict[str, Any] | None:
        """For a workflow node, its parents' outputs keyed by parent node id
        (each the output the parent's execution reported, None if it reported
        none or did not run); None for a root node and for plain jobs."""
        return self._parent_outputs

    def shard(self) -> tuple[int, int]:
        """Which part of its trigger this execution runs: (index, count),
        index from 0. A sharded job's trigger runs `shardCount` executions, a
        broadcast job's one per eligible worker; a single job's is (0, 1).
        Split the work by it, e.g. take the rows whose id modulo count is index."""
        return (self.shard_index, self.shard_count)

    @property
    def scheduled_at(self) -> datetime:
        """Due time of the trigger (UTC)."""
        return datetime.fromtimestamp(self.scheduled_at_ms / 1000, tz=timezone.utc)

    @property
    def cancelled(self) -> bool:
        """True once the attempt's outcome is decided without the handler
        (timeout, stop request, shutdown): stop working and return."""
        return self._thread_event.is_set()

    @property
    def cancel_reason(self) -> CancelReason | None:
        return self._reason

    async def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Waits (async) until cancelled or `timeout` seconds; True if cancelled."""
        try:
            await asyncio.wait_for(self._loop_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def wait_cancelled_blocking(self, timeout: float | None = None) -> bool:
        """For sync handlers: sleeps until cancelled or `timeout` seconds;
        True if cancelled. Use it instead of `time.sleep`."""
        return self._thread_event.wait(timeout)

    def log(self, message: str, level: str = "info") -> None:
        """Adds a line to this attempt's execution log (batched, best effort).
        Levels: debug, info, warn (or warning), error."""
        self._sink.add_line(self.execution_id, self.attempt, check_level(level), str(message))

    def progress(self, pct: float) -> None:
        """Reports progress, 0–100; the latest value is sent with the next batch."""
        self._sink.set_progress(self.execution_id, self.attempt, check_progress(pct))

    def _cancel(self, reason: CancelReason) -> None:
        """Called on the event loop when the outcome is decided."""
        if self._reason is None:
            self._reason = reason
        self._thread_event.set()
        self._loop_event.set()
