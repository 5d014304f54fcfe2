"""The worker protocol's names and messages (docs/worker-protocol.md).

Pure data: building and parsing the JSON messages and the names of every
queue, exchange and Redis key under a namespace. Nothing here does I/O, so it
is what the unit tests pin down against the documented shapes.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

PROTOCOL_VERSION = 1

#: The dispatchers declare the heartbeats queue with this message TTL; a
#: worker declaring it must use the very same arguments or RabbitMQ refuses.
HEARTBEAT_TTL_MS = 30_000

#: Attempt keys outlive any redelivery of their dispatch.
ATTEMPT_KEY_TTL_MS = 24 * 3600 * 1000

#: Error of an attempt stopped because a stop request was posted for it.
STOPPED_ERROR = "stopped at the scheduler's request"
#: Error of an attempt still running when the shutdown grace period ended.
SHUTDOWN_ERROR = "worker shut down before the handler finished"

ResultKind = Literal["started", "succeeded", "failed", "timed_out"]
LifecycleState = Literal["online", "draining", "offline"]
LogLevel = Literal["debug", "info", "warn", "error"]
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warn", "error")

_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


def now_ms() -> int:
    """Milliseconds since the epoch (UTC), the protocol's time unit."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Names:
    """Every exchange, queue and key, prefixed by one namespace."""

    namespace: str = "kairos"

    @property
    def dispatch_exchange(self) -> str:
        return f"{self.namespace}.dispatch"

    @property
    def reroute_exchange(self) -> str:
        return f"{self.namespace}.reroute"

    @property
    def reroute_queue(self) -> str:
        return f"{self.namespace}.reroute"

    @property
    def results_queue(self) -> str:
        return f"{self.namespace}.results"

    @property
    def heartbeats_queue(self) -> str:
        return f"{self.namespace}.heartbeats"

    @property
    def logs_queue(self) -> str:
        return f"{self.namespace}.logs"

    def worker_queue(self, worker_id: str) -> str:
        return f"{self.namespace}.worker.{worker_id}"

    def attempt_key(self, execution_id: str, attempt: int) -> str:
        return f"{self.namespace}:attempt:{execution_id}:{attempt}"

    def stop_key(self, execution_id: str, attempt: int) -> str:
        return f"{self.namespace}:stop:{execution_id}:{attempt}"


class MalformedDispatch(ValueError):
    """A dispatch that cannot be run: not JSON, another version, wrong shape."""


@dataclass(frozen=True)
class Dispatch:
    """One attempt of one execution, as the dispatcher sent it."""

    execution_id: str
    job_id: str
    attempt: int
    handler: str
    params: Any
    scheduled_at: int
    timeout_ms: int | None
    #: Which part of a broadcast or sharded trigger this is: index from 0,
    #: of count (absent from the message for a single job: 0 of 1).
    shard_index: int = 0
    shard_count: int = 1
    #: A workflow node's parents' outputs, by parent node id (absent: None).
    parent_outputs: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, int]:
        """The attempt's identity: what `held` lists and the Redis keys name."""
        return (self.execution_id, self.attempt)


def _is_int(v: Any) -> TypeGuard[int]:
    # bool is an int subclass in Python; JSON true is not a number.
    return isinstance(v, int) and not isinstance(v, bool)


def decode_dispatch(body: bytes) -> Dispatch:
    """Parses a dispatch, refusing other protocol versions and wrong shapes."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise MalformedDispatch(f"not JSON: {e}") from e
    if not isinstance(value, dict):
        raise MalformedDispatch("not a JSON object")
    v = value.get("v")
    if not _is_int(v):
        raise MalformedDispatch('no protocol version field "v"')
    if v != PROTOCOL_VERSION:
        raise MalformedDispatch(
            f"unsupported protocol version {v} (this worker speaks {PROTOCOL_VERSION})"
        )
    for name in ("execution_id", "job_id", "handler"):
        if not isinstance(value.get(name), str):
            raise MalformedDispatch(f"not a dispatch message: {name!r} must be a string")
    attempt = value.get("attempt")
    if not _is_int(attempt) or not 0 <= attempt <= _U32_MAX:
        raise MalformedDispatch("not a dispatch message: 'attempt' must be a u32")
    scheduled_at = value.get("scheduled_at")
    if not _is_int(scheduled_at):
        raise MalformedDispatch("not a dispatch message: 'scheduled_at' must be ms since the epoch")
    timeout_ms = value.get("timeout_ms")
    if timeout_ms is not None and (not _is_int(timeout_ms) or not 0 <= timeout_ms <= _U64_MAX):
        raise MalformedDispatch("not a dispatch message: 'timeout_ms' must be null or a u64")
    shard_index, shard_count = _shard(value.get("shard"))
    parent_outputs = value.get("parent_outputs")
    if parent_outputs is not None and not isinstance(parent_outputs, dict):
        raise MalformedDispatch("not a dispatch message: 'parent_outputs' must be an object")
    return Dispatch(
        execution_id=value["execution_id"],
        job_id=value["job_id"],
        attempt=attempt,
        handler=value["handler"],
        params=value.get("params"),
        scheduled_at=scheduled_at,
        timeout_ms=timeout_ms,
        shard_index=shard_index,
        shard_count=shard_count,
        parent_outputs=parent_outputs,
    )


def _shard(shard: Any) -> tuple[int, int]:
    """The dispatch's `shard` ({"index": i, "count": n}), (0, 1) when absent."""
    if shard is None:
        return (0, 1)
    if not isinstance(shard, dict):
        raise MalformedDispatch("not a dispatch message: 'shard' must be an object")
    index, count = shard.get("index"), shard.get("count")
    if not _is_int(count) or not 1 <= count <= _U32_MAX or not _is_int(index) or not 0 <= index < count:
        raise MalformedDispatch(
            "not a dispatch message: 'shard' must have a count of at least 1 and an index below it"
        )
    return (index, count)


def encode(message: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON. NaN and infinities are refused: they are not JSON."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def result_message(
    *,
    execution_id: str,
    attempt: int,
    worker_id: str,
    incarnation: str,
    kind: ResultKind,
    output: Any = None,
    error: str | None = None,
    retryable: bool | None = None,
    at: int | None = None,
) -> dict[str, Any]:
    """A result: `started`, or an outcome with `output` or `error`.
    `retryable` is sent only when said (`False`: a failure no retry can fix)."""
    msg: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "execution_id": execution_id,
        "attempt": attempt,
        "worker_id": worker_id,
        "kind": kind,
        "output": output,
        "error": error,
        "at": now_ms() if at is None else at,
        "incarnation": incarnation,
    }
    if retryable is not None:
        msg["retryable"] = retryable
    return msg


@dataclass(frozen=True)
class Load:
    """The figures the balancer reads from a heartbeat."""

    active: int
    avg_cost_ms: float
    cpu_idle: float


def heartbeat_message(
    *,
    worker_id: str,
    queue: str,
    capacity: int,
    load: Load,
    state: LifecycleState,
    incarnation: str,
    handlers: list[str],
    group: str | None,
    held: list[tuple[str, int]],
    at: int | None = None,
) -> dict[str, Any]:
    """A heartbeat: registration, load figures and the attempts held."""
    return {
        "v": PROTOCOL_VERSION,
        "worker_id": worker_id,
        "queue": queue,
        "capacity": capacity,
        "active": load.active,
        "avg_cost_ms": load.avg_cost_ms,
        "cpu_idle": load.cpu_idle,
        "state": state,
        "at": now_ms() if at is None else at,
        "incarnation": incarnation,
        "handlers": sorted(handlers),
        "group": group,
        "held": [{"execution_id": e, "attempt": a} for e, a in held],
    }


@dataclass(frozen=True)
class LogLine:
    """One line a handler logged."""

    at: int
    level: str
    message: str


def log_message(
    *,
    execution_id: str,
    attempt: int,
    worker_id: str,
    lines: list[LogLine],
    progress: float | None,
) -> dict[str, Any]:
    """A batch of one attempt's log lines, with its latest progress if any."""
    msg: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "execution_id": execution_id,
        "attempt": attempt,
        "worker_id": worker_id,
        "lines": [{"at": ln.at, "level": ln.level, "message": ln.message} for ln in lines],
    }
    if progress is not None:
        msg["progress"] = progress
    return msg


def check_progress(pct: float) -> float:
    """A progress figure as the protocol carries it: a finite 0–100 float."""
    value = float(pct)
    if not math.isfinite(value) or not 0.0 <= value <= 100.0:
        raise ValueError(f"progress must be between 0 and 100, got {pct!r}")
    return value


def check_level(level: str) -> str:
    """A log level name; `warning` is accepted as Python's spelling of `warn`."""
    name = level.lower()
    if name == "warning":
        name = "warn"
    if name not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    return name
