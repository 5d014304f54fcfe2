"""Kairos worker SDK for Python: run job handlers for the Kairos scheduler.

    from kairos_worker import Worker, RetryableError

    worker = Worker(amqp_url=..., redis_url=..., worker_id="w-1", capacity=4)

    @worker.handler("resize-image")
    async def resize(ctx, params):
        ctx.log("starting")
        ctx.progress(50)
        return {"ok": True}

    worker.run()

Modules: `worker` (API and process loops), `execute` (one attempt: timeout,
stop, shutdown), `context` (what a handler sees), `protocol` (messages and
names), `amqp` / `guard` (RabbitMQ / Redis), `logship` (execution logs),
`load` (heartbeat figures), `state` (shared counters), `config` (settings).
"""

from .config import ConfigError, WorkerConfig
from .context import JobContext
from .errors import PermanentError, RetryableError
from .worker import StartupError, Worker

__all__ = [
    "ConfigError",
    "JobContext",
    "PermanentError",
    "RetryableError",
    "StartupError",
    "Worker",
    "WorkerConfig",
]
__version__ = "0.1.0"
