"""Execution log shipping: handlers' `ctx.log` lines and `ctx.progress`
figures, batched per attempt and published to `<ns>.logs`.

Best effort by design (a log must never hold up or fail a job): lines are
flushed every 200 ms or as soon as 100 wait, each batch is published with a
confirm and retried a few times, and what still fails is dropped and counted.
Handlers may log from threads, so adding is guarded by a lock and wakes the
flusher through the loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Awaitable, Callable

from .protocol import LogLine, encode, log_message, now_ms

log = logging.getLogger("kairos_worker.logs")

FLUSH_EVERY = 0.2
BATCH_LINES = 100
#: Lines kept waiting across all attempts; beyond it the oldest are dropped
#: (a broker outage must not grow memory without bound).
MAX_PENDING_LINES = 10_000
#: A longer message is cut, so one line cannot make a huge broker message.
MAX_MESSAGE_CHARS = 8192
PUBLISH_TRIES = 3

Publish = Callable[[bytes], Awaitable[None]]


@dataclass
class _Pending:
    lines: list[LogLine] = field(default_factory=list)
    progress: float | None = None
    progress_changed: bool = False


class LogShipper:
    def __init__(self, worker_id: str, publish: Publish) -> None:
        self._worker_id = worker_id
        self._publish = publish
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._count = 0
        self._dropped = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()

    def add_line(self, execution_id: str, attempt: int, level: str, message: str) -> None:
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[: MAX_MESSAGE_CHARS - 1] + "…"
        line = LogLine(at=now_ms(), level=level, message=message)
        with self._lock:
            pending = self._pending.setdefault((execution_id, attempt), _Pending())
            pending.lines.append(line)
            self._count += 1
            if self._count > MAX_PENDING_LINES:
                self._drop_oldest()
            full = len(pending.lines) >= BATCH_LINES
        if full:
            self._poke()

    def set_progress(self, execution_id: str, attempt: int, pct: float) -> None:
        with self._lock:
            pending = self._pending.setdefault((execution_id, attempt), _Pending())
            pending.progress = pct
            pending.progress_changed = True

    def _drop_oldest(self) -> None:
        # Under the lock. Drops from the attempt with the most lines waiting.
        victim = max(self._pending.values(), key=lambda p: len(p.lines))
        del victim.lines[0]
        self._count -= 1
        self._dropped += 1

    def _poke(self) -> None:
        loop = self._loop
        if loop is None:
            return
        try:
            loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:
            pass  # the loop is closed: the process is ending

    def _take(self) -> list[bytes]:
        """Everything waiting, as messages of at most BATCH_LINES lines each;
        the latest progress rides on an attempt's last message."""
        with self._lock:
            pending, self._pending, self._count = self._pending, {}, 0
        messages: list[bytes] = []
        for (execution_id, attempt), p in pending.items():
            if not p.lines and not p.progress_changed:
                continue
            chunks = [p.lines[i : i + BATCH_LINES] for i in range(0, len(p.lines), BATCH_LINES)] or [[]]
            for i, chunk in enumerate(chunks):
                last = i == len(chunks) - 1
                messages.append(
                    encode(
                        log_message(
                            execution_id=execution_id,
                            attempt=attempt,
                            worker_id=self._worker_id,
                            lines=chunk,
                            progress=p.progress if last and p.progress_changed else None,
                        )
                    )
                )
        return messages

    async def flush(self) -> None:
        """Publishes everything waiting now. One flush at a time keeps each
        attempt's lines in order."""
        async with self._flushing:
            for body in self._take():
                await self._send(body)
            with self._lock:
                dropped, self._dropped = self._dropped, 0
            if dropped:
                log.warning("dropped %d execution log lines (log publishing could not keep up)", dropped)

    async def _send(self, body: bytes) -> None:
        for attempt in range(1, PUBLISH_TRIES + 1):
            try:
                await self._publish(body)
                return
            except Exception as e:  # noqa: BLE001 - any broker failure is retried, then dropped
                if attempt == PUBLISH_TRIES:
                    log.warning("dropping an execution log batch after %d tries: %s", attempt, e)
                    return
                await asyncio.sleep(0.1 * attempt)

    async def run(self, stop: asyncio.Event) -> None:
        """Flushes every FLUSH_EVERY, or early when a batch is full, until
        `stop`; then flushes what is left."""
        self._loop = asyncio.get_running_loop()
        while not stop.is_set():
            try:
                await asyncio.wait_for(self._wake.wait(), FLUSH_EVERY)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            await self.flush()
        await self.flush()
