"""State shared by a running worker's tasks: the places for accepted
dispatches (running + buffered), the pool of running slots, the attempts held
(for the heartbeat's `held`), the running attempts' stop signals, the cost
window and the lifecycle state.

Everything here is touched from the event loop's thread only.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Iterator
from contextlib import contextmanager

from .load import CostWindow
from .protocol import LifecycleState


class Places:
    """Accepted dispatches not yet finished, waiting or running: at most
    capacity + buffer. Dispatches are acked when their handler starts, so
    this (not the broker's prefetch) is what backpressure is decided on."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.taken = 0
        self._freed = asyncio.Event()

    def try_take(self) -> bool:
        if self.taken < self.limit:
            self.taken += 1
            return True
        return False

    async def take_within(self, wait: float, give_up: asyncio.Event) -> bool:
        """Takes a place, waiting up to `wait` seconds for one to be given
        back: short handlers free places within milliseconds, and refusing at
        once would bounce work a moment later this worker could take."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            # Cleared before the check (no await in between), so a place given
            # back after the check still wakes us.
            self._freed.clear()
            if self.try_take():
                return True
            left = deadline - loop.time()
            if left <= 0 or give_up.is_set():
                return False
            try:
                await asyncio.wait_for(self._freed.wait(), left)
            except asyncio.TimeoutError:
                return self.try_take()

    def give_back(self) -> None:
        self.taken -= 1
        self._freed.set()


class Shared:
    def __init__(self, capacity: int, buffer: int) -> None:
        self.capacity = capacity
        self.buffer = buffer
        self.places = Places(capacity + buffer)
        #: One permit per running handler.
        self.slots = asyncio.Semaphore(capacity)
        self.active = 0
        self.held: Counter[tuple[str, int]] = Counter()
        #: Running attempts by stop key.
        self.running: dict[str, asyncio.Event] = {}
        self.costs = CostWindow()
        self.state: LifecycleState = "online"
        #: Set when the grace period ends: running handlers are stopped.
        self.hard_stop = asyncio.Event()
        #: Every delivery task, so shutdown can wait for them.
        self.tasks: set[asyncio.Task[None]] = set()

    def set_state(self, state: LifecycleState) -> None:
        self.state = state

    @contextmanager
    def holding(self, key: tuple[str, int]) -> Iterator[None]:
        """Lists an attempt in `held` from acceptance until its final result
        is confirmed (or it is handed back)."""
        self.held[key] += 1
        try:
            yield
        finally:
            self.held[key] -= 1
            if self.held[key] <= 0:
                del self.held[key]

    def held_list(self) -> list[tuple[str, int]]:
        return sorted(self.held)

    @contextmanager
    def tracking(self, stop_key: str, stop: asyncio.Event) -> Iterator[None]:
        """Registers a running attempt so the stop watcher can reach it."""
        self.running[stop_key] = stop
        try:
            yield
        finally:
            if self.running.get(stop_key) is stop:
                del self.running[stop_key]
