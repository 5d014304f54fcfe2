"""A real Kairos cluster for end-to-end tests: a fresh MySQL database, a
unique namespace, `kairos api` and `kairos dispatcher` from KAIROS_BIN, and
Python workers (examples/worker.py) as subprocesses.

Mirrors tests/support/mod.rs of the Rust suite (same env vars, the same
shortened liveness timings). Everything it creates it removes: processes,
the database, the namespace's queues, exchanges and Redis keys.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import urlsplit

import httpx
import pymysql  # type: ignore[import-untyped]

SDK_DIR = Path(__file__).resolve().parent.parent
EXAMPLE_WORKER = SDK_DIR / "examples" / "worker.py"

MYSQL_URL = os.environ.get("KAIROS_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
REDIS_URL = os.environ.get("KAIROS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("KAIROS_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")

#: The Rust fault tests' FAST timings: a silent worker is dead after 3 s.
FAST_ENV = {
    "KAIROS_LEASE_TTL_MS": "4000",
    "KAIROS_WORKER_DEAD_AFTER_MS": "3000",
    "KAIROS_WORKER_HEARTBEAT_MS": "1000",
}

T = TypeVar("T")


def kairos_bin() -> Path:
    default = SDK_DIR.parent.parent / "target" / "debug" / "kairos"
    return Path(os.environ.get("KAIROS_BIN", str(default))).resolve()


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 30.0, every: float = 0.1) -> T:
    """Polls `check` until it returns something other than None, or fails
    after `timeout` naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def _mysql_connect(url: str, database: str | None = None) -> pymysql.connections.Connection:
    u = urlsplit(url)
    return pymysql.connect(
        host=u.hostname or "127.0.0.1",
        port=u.port or 3306,
        user=u.username or "root",
        password=u.password or "",
        database=database,
        autocommit=True,
    )


def _with_database(url: str, database: str) -> str:
    u = urlsplit(url)
    return u._replace(path=f"/{database}").geturl()


class Cluster:
    def __init__(self, extra_env: dict[str, str] | None = None) -> None:
        binary = kairos_bin()
        if not binary.exists():
            raise RuntimeError(f"no kairos binary at {binary}: run `cargo build --bin kairos` or set KAIROS_BIN")
        self.binary = binary
        self.namespace = unique("py")
        self.database = unique("py")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_dir = Path(tempfile.mkdtemp(prefix="kairos_py_e2e_"))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.worker_ids: set[str] = set()
        self.http = httpx.Client(base_url=self.base, timeout=10.0)
        self.env = {
            **os.environ,
            "KAIROS_HTTP_ADDR": f"127.0.0.1:{self.port}",
            "KAIROS_LOG": os.environ.get("KAIROS_TEST_LOG", "warn,kairos=info"),
            "KAIROS_CALLBACK_SECRET": "e2e-secret",
            "KAIROS_CALLBACK_ALLOW_PRIVATE": "true",
            "NO_COLOR": "1",
            "KAIROS_DATABASE_URL": _with_database(MYSQL_URL, self.database),
            "KAIROS_REDIS_URL": REDIS_URL,
            "KAIROS_AMQP_URL": AMQP_URL,
            "KAIROS_NAMESPACE": self.namespace,
            **FAST_ENV,
            **(extra_env or {}),
        }

    # -- lifecycle -------------------------------------------------------

    def start(self, dispatchers: int = 1) -> "Cluster":
        with _mysql_connect(MYSQL_URL) as c, c.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{self.database}`")
        subprocess.run([str(self.binary), "migrate"], env=self.env, check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=open(self.log_dir / "migrate.log", "wb"))
        # Every /openapi route needs a key: an operator key (the tests read
        # /openapi/workers, which is the operator's), made with the CLI as
        # an operator would.
        key = subprocess.run(
            [str(self.binary), "keys", "create", "--tenant", "default", "--role", "operator"],
            env=self.env, check=True, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        ).stdout.strip()
        self.http.headers["Authorization"] = f"Bearer {key}"
        self.spawn("api", [str(self.binary), "api"])
        for i in range(dispatchers):
            self.spawn(f"dispatcher-{i}", [str(self.binary), "dispatcher"])
        wait_for("the API to become ready", self._ready, timeout=60)
        return self

    def _ready(self) -> bool | None:
        try:
            return True if self.http.get("/readyz").status_code == 200 else None
        except httpx.HTTPError:
            return None

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, env={**self.env, **(env or {})}, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def spawn_worker(self, worker_id: str, **env: str) -> subprocess.Popen[bytes]:
        """Starts examples/worker.py as `worker_id`; keyword args are extra
        env vars (e.g. KAIROS_WORKER_CAPACITY="2")."""
        self.worker_ids.add(worker_id)
        return self.spawn(
            worker_id,
            [sys.executable, str(EXAMPLE_WORKER)],
            {"KAIROS_WORKER_ID": worker_id, "PYTHONUNBUFFERED": "1", **env},
        )

    def signal(self, name: str, sig: signal.Signals) -> None:
        self.procs[name].send_signal(sig)

    def wait_exit(self, name: str, timeout: float) -> int:
        return self.procs[name].wait(timeout=timeout)

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def close(self, failed: bool) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.http.close()
        self._remove_services_state()
        if failed or os.environ.get("KAIROS_TEST_LOG"):
            print(f"process logs kept in {self.log_dir}", file=sys.stderr)
        else:
            for f in self.log_dir.iterdir():
                f.unlink()
            self.log_dir.rmdir()

    def _remove_services_state(self) -> None:
        with _mysql_connect(MYSQL_URL) as c, c.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{self.database}`")
        import redis

        r = redis.Redis.from_url(REDIS_URL)
        keys = list(r.scan_iter(match=f"{self.namespace}:*", count=1000))
        if keys:
            r.delete(*keys)
        r.close()
        _delete_amqp_names(self.namespace, self.worker_ids)

    # -- API -------------------------------------------------------------

    def get(self, path: str) -> Any:
        r = self.http.get(path)
        r.raise_for_status()
        return r.json()

    def create_job(self, body: dict[str, Any]) -> str:
        r = self.http.post("/openapi/jobs", json=body)
        assert r.status_code == 201, f"create failed: {r.status_code} {r.text}"
        return str(r.json()["jobId"])

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self.get(f"/openapi/jobs/{job_id}"))

    def executions(self, job_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/openapi/jobs/{job_id}/executions?limit=500")["items"])

    def execution(self, execution_id: str) -> dict[str, Any]:
        return dict(self.get(f"/openapi/executions/{execution_id}"))

    def workers(self) -> dict[str, dict[str, Any]]:
        return {w["workerId"]: w for w in self.get("/openapi/workers")["items"]}

    def wait_job(self, job_id: str, statuses: set[str], timeout: float = 30.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            job = self.job(job_id)
            return job if job["status"] in statuses else None

        try:
            return wait_for(f"job {job_id} to reach {sorted(statuses)}", check, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; job now: {self.job(job_id)}") from None

    def wait_execution(self, job_id: str, statuses: set[str], timeout: float = 30.0) -> dict[str, Any]:
        """The job's newest execution once its status is one of `statuses`."""

        def check() -> dict[str, Any] | None:
            items = self.executions(job_id)
            return items[0] if items and items[0]["status"] in statuses else None

        return wait_for(f"an execution of {job_id} in {sorted(statuses)}", check, timeout)

    def wait_workers(self, ids: set[str], state: str = "online", timeout: float = 30.0) -> dict[str, dict[str, Any]]:
        def check() -> dict[str, dict[str, Any]] | None:
            workers = self.workers()
            ok = all(workers.get(i, {}).get("state") == state for i in ids)
            return workers if ok else None

        return wait_for(f"workers {sorted(ids)} to be {state}", check, timeout)


def _delete_amqp_names(namespace: str, worker_ids: set[str]) -> None:
    """Removes the namespace's queues and exchanges (dispatchers and workers
    declare them; nobody deletes them)."""
    import asyncio

    import aio_pika

    async def run() -> None:
        conn = await aio_pika.connect(AMQP_URL, timeout=5)
        try:
            queues = [f"{namespace}.{q}" for q in ("reroute", "results", "heartbeats", "logs")]
            queues += [f"{namespace}.worker.{w}" for w in worker_ids]
            for name in queues:
                ch = await conn.channel()
                await ch.queue_delete(name)
                await ch.close()
            for name in (f"{namespace}.dispatch", f"{namespace}.reroute"):
                ch = await conn.channel()
                await ch.exchange_delete(name)
                await ch.close()
        finally:
            await conn.close()

    try:
        asyncio.run(run())
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the test's outcome
        print(f"could not remove namespace {namespace} from RabbitMQ: {e}", file=sys.stderr)
