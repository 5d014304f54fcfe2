"""Three kinds of worker side by side, each serving its own handlers: a stock
`kairos worker` limited to `noop`, the Rust example worker
(examples/media_worker.rs: `thumbnail`, `report`) and this SDK's example
worker (`echo`, `chatty`, ...). Jobs go only to a worker that serves their
handler; a job nobody serves waits, visibly, until such a worker starts; log
lines written by a Rust and by a Python handler are read back through the API.

Needs the example's binary (`cargo build --example media_worker`;
KAIROS_MEDIA_WORKER_BIN, default ../../target/debug/examples/media_worker).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness import SDK_DIR, Cluster, wait_for

STOCK, RUST, PYTHON = "stock-noop", "rust-media", "py-mixed"

#: handler → (params, the worker that must run it)
KINDS: list[tuple[str, dict[str, Any], str]] = [
    ("noop", {}, STOCK),
    ("thumbnail", {"width": 1200, "height": 800, "maxEdge": 300}, RUST),
    ("report", {"rows": 2}, RUST),
    ("echo", {"n": 1}, PYTHON),
    ("chatty", {"lines": 2}, PYTHON),
    ("sleep", {"ms": 10}, PYTHON),
]


def media_worker_bin() -> Path:
    default = SDK_DIR.parent.parent / "target" / "debug" / "examples" / "media_worker"
    path = Path(os.environ.get("KAIROS_MEDIA_WORKER_BIN", str(default))).resolve()
    if not path.exists():
        raise RuntimeError(f"no media_worker at {path}: run `cargo build --example media_worker`")
    return path


def start_rust_worker(cluster: Cluster) -> None:
    # Services mode: the cluster's env carries KAIROS_AMQP_URL, KAIROS_REDIS_URL,
    # KAIROS_NAMESPACE and the fast KAIROS_WORKER_HEARTBEAT_MS.
    cluster.worker_ids.add(RUST)
    cluster.spawn(RUST, [str(media_worker_bin())], {"KAIROS_WORKER_ID": RUST})


def logs(cluster: Cluster, execution_id: str, count: int) -> list[dict[str, Any]]:
    """All of an execution's log lines once there are `count` (they travel
    apart from the result, so they may arrive just after it)."""

    def check() -> list[dict[str, Any]] | None:
        items = list(cluster.get(f"/openapi/executions/{execution_id}/logs?limit=100")["items"])
        return items if len(items) >= count else None

    return wait_for(f"{count} log lines of {execution_id}", check, timeout=15)


def test_each_job_runs_on_a_worker_serving_its_handler(cluster: Cluster) -> None:
    media_worker_bin()  # fail early, before anything starts, if it is missing
    cluster.worker_ids.add(STOCK)
    cluster.spawn(STOCK, [str(cluster.binary), "worker"], {"KAIROS_WORKER_ID": STOCK, "KAIROS_WORKER_HANDLERS": "noop"})
    cluster.spawn_worker(PYTHON)
    workers = cluster.wait_workers({STOCK, PYTHON})
    assert workers[STOCK]["handlers"] == ["noop"]
    assert {"echo", "chatty", "sleep"} <= set(workers[PYTHON]["handlers"])
    assert "thumbnail" not in workers[PYTHON]["handlers"]

    # Nobody serves `thumbnail` yet: the job waits, says for what, never fails.
    first = cluster.create_job(
        {"jobName": "thumb-first", "jobHandler": "thumbnail", "params": {"width": 4000, "height": 3000},
         "maxAttempts": 1}
    )

    def waits() -> dict[str, Any] | None:
        job = cluster.job(first)
        return job if job.get("waitingFor") else None

    waiting = wait_for("the job to wait for a thumbnail worker", waits, timeout=30)
    assert waiting["waitingFor"]["handler"] == "thumbnail"
    assert waiting["status"] != "failed"
    pending = waiting["lastExecution"]
    assert pending["status"] == "pending"
    assert cluster.execution(pending["executionId"])["waitingFor"]["handler"] == "thumbnail"

    start_rust_worker(cluster)
    done = cluster.wait_job(first, {"succeeded", "failed"}, timeout=60)
    assert done["status"] == "succeeded", done
    assert done.get("waitingFor") is None
    ran = done["lastExecution"]
    assert (ran["workerId"], ran["attempt"]) == (RUST, 1)
    assert ran["output"] == {"width": 256, "height": 192, "scale": 0.064}
    history = cluster.execution(ran["executionId"])["events"]
    assert all(e["status"] != "failed" for e in history), history
    assert sorted(cluster.workers()[RUST]["handlers"]) == ["report", "thumbnail"]

    # 300 mixed jobs over all three workers' handlers.
    jobs: list[tuple[str, str, str]] = []
    for i in range(300):
        handler, params, expected = KINDS[i % len(KINDS)]
        job_id = cluster.create_job({"jobName": f"{handler}-{i}", "jobHandler": handler, "params": params})
        jobs.append((job_id, handler, expected))
    for job_id, handler, expected in jobs:
        job = cluster.wait_job(job_id, {"succeeded", "failed"}, timeout=120)
        execution = job["lastExecution"]
        assert job["status"] == "succeeded", (handler, execution)
        assert execution["workerId"] == expected, (handler, execution)

    # Log lines of a Rust handler and of a Python handler, read back.
    by_handler = {handler: job_id for job_id, handler, _ in reversed(jobs)}
    report = cluster.job(by_handler["report"])["lastExecution"]["executionId"]
    lines = logs(cluster, report, 3)
    assert [line["message"] for line in lines] == ["building a report of 2 rows", "row 1/2", "row 2/2"]
    assert {(line["workerId"], line["level"], line["attempt"]) for line in lines} == {(RUST, "info", 1)}
    chatty = cluster.job(by_handler["chatty"])["lastExecution"]["executionId"]
    lines = logs(cluster, chatty, 2)
    assert [(line["message"], line["level"]) for line in lines] == [("line 0", "info"), ("line 1", "warn")]
    assert {line["workerId"] for line in lines} == {PYTHON}
    # The stock worker's `noop` writes none: an empty page, not an error.
    noop = cluster.job(by_handler["noop"])["lastExecution"]["executionId"]
    assert cluster.get(f"/openapi/executions/{noop}/logs")["items"] == []
