"""Redis: the once-per-attempt key and the stop requests.

`SET <key> "<token> <worker_id> <incarnation>" NX PX` makes an attempt run
at most once; the value names this worker process so a dispatcher can give
back the keys a dead or replaced process took without starting (a worker that
reports an incarnation must name it in its keys, or a dispatcher retiring an
earlier process of the same id would take its keys for stale ones). Stop requests are keys too, looked up with
one MGET for every running attempt.
"""

from __future__ import annotations

import logging
import uuid

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from .protocol import ATTEMPT_KEY_TTL_MS

log = logging.getLogger("kairos_worker.guard")

#: Tries of a SET NX whose outcome stays unknown (reply lost, key absent).
WRITE_TRIES = 3

# Deletes the key only if it still holds exactly our value: after a reaper
# gave it back, another worker may own it now.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class GuardUnavailable(Exception):
    """Redis could not say whether the attempt key is ours."""


class Guard:
    def __init__(self, url: str, worker_id: str, incarnation: str) -> None:
        # No retries inside the client: a retried SET NX whose first reply was
        # lost would find our own key and look like someone else's. Ambiguity
        # is resolved below by reading the value back.
        self._redis = aioredis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
            retry=Retry(NoBackoff(), 0),
            # Shown by CLIENT LIST.
            client_name=f"kairos-worker:{worker_id}",
        )
        self._worker_id = worker_id
        self._incarnation = incarnation

    async def ping(self) -> None:
        await self._redis.ping()

    async def take(self, key: str) -> str | None:
        """Takes the attempt key. Returns the value written (our claim) or
        None when another holder has it; raises GuardUnavailable when the
        outcome cannot be known (the dispatch must not run then)."""
        value = f"{uuid.uuid4().hex} {self._worker_id} {self._incarnation}"
        last: Exception | None = None
        for _ in range(WRITE_TRIES):
            try:
                done = await self._redis.set(key, value, nx=True, px=ATTEMPT_KEY_TTL_MS)
                return value if done else None
            except RedisError as e:
                last = e
            # The SET may or may not have been applied: read it back.
            try:
                current = await self._redis.get(key)
            except RedisError as e:
                raise GuardUnavailable(f"cannot take {key}: {e}") from e
            if current == value:
                return value
            if current is not None:
                return None
        raise GuardUnavailable(f"cannot take {key}: {last}")

    async def release(self, key: str, value: str) -> bool:
        """Gives an attempt key back if it still holds `value`."""
        return bool(await self._redis.eval(_RELEASE, 1, key, value))

    async def stops_posted(self, keys: list[str]) -> list[bool]:
        """Which of these stop keys exist (one round trip)."""
        if not keys:
            return []
        found = await self._redis.mget(keys)
        return [v is not None for v in found]

    async def close(self) -> None:
        await self._redis.aclose()
