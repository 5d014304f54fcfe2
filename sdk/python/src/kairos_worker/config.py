"""Worker configuration: arguments win over `KAIROS_*` environment variables,
which win over the defaults (the same variables and defaults as `kairos worker`).
"""

from __future__ import annotations

import os
import random
import re
import socket
from dataclasses import dataclass
from typing import Mapping

DEFAULT_CAPACITY = 8
DEFAULT_HEARTBEAT_MS = 3000
DEFAULT_GRACE_MS = 30_000
DEFAULT_STOP_POLL_MS = 250
DEFAULT_NAMESPACE = "kairos"
#: Worker ids end up in queue names and routing keys.
MAX_ID_LEN = 200
_ID_RE = re.compile(r"[A-Za-z0-9._-]+")


class ConfigError(ValueError):
    """The worker was given something unusable."""


@dataclass(frozen=True)
class WorkerConfig:
    amqp_url: str
    redis_url: str
    worker_id: str
    namespace: str
    capacity: int
    buffer: int
    group: str | None
    heartbeat_ms: int
    grace_ms: int
    stop_poll_ms: int


def check_id(worker_id: str) -> str:
    if not (1 <= len(worker_id) <= MAX_ID_LEN) or not _ID_RE.fullmatch(worker_id):
        raise ConfigError(
            f"worker id {worker_id!r} must be 1–{MAX_ID_LEN} letters, digits, '-', '_' or '.'"
        )
    return worker_id


def default_id() -> str:
    """Hostname (made safe for queue names) plus a random suffix, so two
    workers on one host never share a queue."""
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[: MAX_ID_LEN - 7] or "worker"
    return f"{host}-{random.getrandbits(24):06x}"


def _int(env: Mapping[str, str], name: str, given: int | None, default: int, minimum: int) -> int:
    if given is None:
        raw = env.get(name)
        if raw is None or raw == "":
            return default
        try:
            given = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if given < minimum:
        raise ConfigError(f"{name.removeprefix('KAIROS_').lower()} must be at least {minimum}, got {given}")
    return given


def resolve(
    *,
    amqp_url: str | None = None,
    redis_url: str | None = None,
    worker_id: str | None = None,
    namespace: str | None = None,
    capacity: int | None = None,
    buffer: int | None = None,
    group: str | None = None,
    heartbeat_ms: int | None = None,
    grace_ms: int | None = None,
    stop_poll_ms: int | None = None,
    env: Mapping[str, str] | None = None,
) -> WorkerConfig:
    """Fills what the caller left out from `env` (default: the process
    environment) and checks the result."""
    env = os.environ if env is None else env
    amqp_url = amqp_url or env.get("KAIROS_AMQP_URL")
    redis_url = redis_url or env.get("KAIROS_REDIS_URL")
    if not amqp_url:
        raise ConfigError("no RabbitMQ URL: pass amqp_url or set KAIROS_AMQP_URL")
    if not redis_url:
        raise ConfigError("no Redis URL: pass redis_url or set KAIROS_REDIS_URL")
    cap = _int(env, "KAIROS_WORKER_CAPACITY", capacity, DEFAULT_CAPACITY, 1)
    buf = _int(env, "KAIROS_WORKER_BUFFER", buffer, cap, 0)
    if cap + buf > 65535:
        raise ConfigError("capacity + buffer must not exceed 65535 (the prefetch limit)")
    ns = namespace or env.get("KAIROS_NAMESPACE") or DEFAULT_NAMESPACE
    return WorkerConfig(
        amqp_url=amqp_url,
        redis_url=redis_url,
        worker_id=check_id(worker_id or env.get("KAIROS_WORKER_ID") or default_id()),
        namespace=ns,
        capacity=cap,
        buffer=buf,
        group=group if group is not None else (env.get("KAIROS_WORKER_GROUP") or None),
        heartbeat_ms=_int(env, "KAIROS_WORKER_HEARTBEAT_MS", heartbeat_ms, DEFAULT_HEARTBEAT_MS, 1),
        grace_ms=_int(env, "KAIROS_WORKER_GRACE_MS", grace_ms, DEFAULT_GRACE_MS, 0),
        stop_poll_ms=_int(env, "KAIROS_WORKER_STOP_POLL_MS", stop_poll_ms, DEFAULT_STOP_POLL_MS, 1),
    )
