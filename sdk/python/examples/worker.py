"""An example Python worker with a few handlers; the end-to-end tests run it.

Configuration comes from the environment (KAIROS_AMQP_URL, KAIROS_REDIS_URL,
KAIROS_WORKER_ID, KAIROS_NAMESPACE, KAIROS_WORKER_CAPACITY, ...):

    KAIROS_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f \
    KAIROS_REDIS_URL=redis://127.0.0.1:6379/0 python examples/worker.py
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kairos_worker import JobContext, PermanentError, RetryableError, Worker

worker = Worker()


@worker.handler("echo")
async def echo(ctx: JobContext, params: Any) -> dict[str, Any]:
    """Succeeds at once with its params and where it ran."""
    return {"params": params, "worker": ctx.worker_id, "attempt": ctx.attempt}


@worker.handler("shard")
async def shard(ctx: JobContext, params: Any) -> dict[str, Any]:
    """Succeeds with its part of a broadcast or sharded trigger."""
    index, count = ctx.shard()
    return {"index": index, "count": count, "worker": ctx.worker_id}


@worker.handler("fan-in")
async def fan_in(ctx: JobContext, params: Any) -> dict[str, Any]:
    """A workflow node (docs/workflows.md): succeeds with its parents'
    outputs, keyed by parent node id (None for a root node)."""
    return {"parents": ctx.parent_outputs(), "worker": ctx.worker_id}


@worker.handler("sleep")
async def sleep(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
    """Sleeps `ms` milliseconds, logging and reporting progress as it goes;
    stops early (CancelledError) when the scheduler or a timeout stops it."""
    total = int(params.get("ms", 1000))
    steps = 10
    ctx.log(f"sleeping {total} ms")
    for i in range(steps):
        await asyncio.sleep(total / steps / 1000)
        ctx.progress(100 * (i + 1) / steps)
    ctx.log("done")
    return {"slept_ms": total, "worker": ctx.worker_id}


@worker.handler("sleep-sync")
def sleep_sync(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
    """The same as `sleep` in a thread: polls the cancellation signal."""
    total = int(params.get("ms", 1000))
    started = time.monotonic()
    if ctx.wait_cancelled_blocking(total / 1000):
        raise RetryableError(f"cancelled ({ctx.cancel_reason}) after {time.monotonic() - started:.1f} s")
    return {"slept_ms": total, "worker": ctx.worker_id}


@worker.handler("fail")
async def fail(ctx: JobContext, params: dict[str, Any]) -> None:
    """Fails with `message` (retried per the job's maxAttempts)."""
    raise RetryableError(str(params.get("message", "failed on purpose")))


@worker.handler("reject")
async def reject(ctx: JobContext, params: dict[str, Any]) -> None:
    """Fails with `message` and says no retry can help: the execution fails
    at once, whatever the job's maxAttempts."""
    raise PermanentError(str(params.get("message", "rejected on purpose")))


@worker.handler("flaky")
async def flaky(ctx: JobContext, params: dict[str, Any]) -> dict[str, Any]:
    """Fails its first `failures` attempts with a plain exception, then succeeds."""
    if ctx.attempt <= int(params.get("failures", 1)):
        raise ConnectionError(f"attempt {ctx.attempt} hit a flaky dependency")
    return {"attempt": ctx.attempt}


@worker.handler("chatty")
async def chatty(ctx: JobContext, params: dict[str, Any]) -> dict[str, int]:
    """Logs `lines` lines and ends at 100 % progress."""
    n = int(params.get("lines", 3))
    for i in range(n):
        ctx.log(f"line {i}", level="warn" if i == n - 1 else "info")
    ctx.progress(100)
    return {"lines": n}


if __name__ == "__main__":
    worker.run()
