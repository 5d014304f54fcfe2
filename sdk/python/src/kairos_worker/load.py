"""Load figures for heartbeats: the mean handler cost over a recent window and
the machine's CPU idle percentage between two samples.

CPU idle comes from /proc/stat deltas on Linux (like the stock worker, the
whole machine, not this process: the balancer compares hosts). Elsewhere the
one-minute load average per core stands in for it.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass

#: Runs averaged over for `avg_cost_ms` (the stock worker uses the same).
COST_WINDOW = 100


class CostWindow:
    """Durations of the last `size` handler runs."""

    def __init__(self, size: int = COST_WINDOW) -> None:
        self._samples: deque[float] = deque(maxlen=size)

    def record(self, ms: float) -> None:
        self._samples.append(ms)

    def mean(self) -> float:
        """Mean of the window; 0 before the first run."""
        if not self._samples:
            return 0.0
        return sum(self._samples) / len(self._samples)


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative jiffies from the aggregate `cpu` line of /proc/stat."""

    idle: int
    total: int


def parse_proc_stat(text: str) -> CpuTimes:
    """Reads the aggregate `cpu` line. Idle counts `idle` + `iowait` (a CPU
    waiting on I/O could run a handler); `guest` and `guest_nice` are left out
    of the total because the kernel already counts them in `user` and `nice`."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(f) for f in fields[1:]]
            # user nice system idle iowait irq softirq steal [guest guest_nice]
            values += [0] * (8 - len(values))
            idle = values[3] + values[4]
            return CpuTimes(idle=idle, total=sum(values[:8]))
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def idle_percent(before: CpuTimes, after: CpuTimes) -> float | None:
    """Idle share of the time between two samples, or None when no time passed."""
    total = after.total - before.total
    if total <= 0:
        return None
    idle = after.idle - before.idle
    return min(100.0, max(0.0, 100.0 * idle / total))


class CpuSampler:
    """CPU idle since the previous call."""

    def __init__(self, proc_stat: str = "/proc/stat") -> None:
        self._path = proc_stat
        self._last: CpuTimes | None = self._read()
        # Reported when two calls fall in the same jiffy.
        self._previous = 100.0

    def _read(self) -> CpuTimes | None:
        try:
            with open(self._path, encoding="ascii") as f:
                return parse_proc_stat(f.read())
        except (OSError, ValueError):
            return None

    def idle(self) -> float:
        now = self._read()
        if now is None:
            return self._from_load_average()
        value = idle_percent(self._last, now) if self._last is not None else None
        self._last = now
        if value is not None:
            self._previous = value
        return self._previous

    @staticmethod
    def _from_load_average() -> float:
        """Without /proc/stat: 100 minus the run queue per core, as a percentage."""
        try:
            load1 = os.getloadavg()[0]
        except OSError:
            return 100.0
        cores = os.cpu_count() or 1
        return min(100.0, max(0.0, 100.0 - 100.0 * load1 / cores))
