"""End to end against the real dispatcher: stop requests, a worker killed
mid-job, graceful shutdown within and past the grace period."""

from __future__ import annotations

import signal
import time

from harness import Cluster, wait_for

STOPPED = "stopped at the scheduler's request"
SHUT_DOWN = "worker shut down before the handler finished"


def test_cancelling_a_running_job_stops_its_handler(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a", KAIROS_WORKER_CAPACITY="1")
    cluster.wait_workers({"py-a"})
    # One after the other on a single slot: the second runs only if the
    # first one's slot came back when it was stopped.
    for handler in ("sleep", "sleep-sync"):
        job = cluster.create_job({"jobName": handler, "jobHandler": handler, "params": {"ms": 60000}, "maxAttempts": 3})
        running = cluster.wait_execution(job, {"running"}, timeout=20)
        asked = time.monotonic()
        r = cluster.http.delete(f"/openapi/jobs/{job}")
        assert r.status_code == 200, r.text
        ended = cluster.wait_execution(job, {"cancelled"}, timeout=10)
        assert time.monotonic() - asked < 5, "the stop request took too long to reach the handler"
        assert ended["executionId"] == running["executionId"]
        assert ended["attempt"] == 1, "a stopped attempt is never retried"
        assert ended["error"] == STOPPED
        assert ended["stopRequestedAt"] is not None
        assert len(cluster.executions(job)) == 1


def test_a_worker_killed_mid_job_has_its_attempt_retried_on_another(cluster: Cluster) -> None:
    for w in ("py-a", "py-b"):
        cluster.spawn_worker(w, KAIROS_WORKER_HEARTBEAT_MS="1000")
    cluster.wait_workers({"py-a", "py-b"})
    job = cluster.create_job(
        {"jobName": "doomed", "jobHandler": "sleep", "params": {"ms": 3000}, "maxAttempts": 2, "retryBackoffMs": 100}
    )
    first = cluster.wait_execution(job, {"running"}, timeout=20)
    victim = first["workerId"]
    survivor = ({"py-a", "py-b"} - {victim}).pop()
    cluster.signal(victim, signal.SIGKILL)

    # Declared dead after 3 s of silence with no consumer on its queue.
    cluster.wait_job(job, {"succeeded"}, timeout=45)
    (execution,) = cluster.executions(job)
    assert (execution["attempt"], execution["workerId"]) == (2, survivor), execution
    events = cluster.execution(execution["executionId"])["events"]
    lost = [e for e in events if e["status"] == "lost"]
    assert lost and lost[0]["attempt"] == 1 and lost[0]["workerId"] == victim, events
    assert cluster.workers()[victim]["state"] == "offline"


def test_sigterm_lets_a_running_handler_finish_and_report(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a", KAIROS_WORKER_GRACE_MS="15000")
    cluster.wait_workers({"py-a"})
    job = cluster.create_job({"jobName": "s", "jobHandler": "sleep", "params": {"ms": 2000}})
    cluster.wait_execution(job, {"running"}, timeout=20)
    cluster.signal("py-a", signal.SIGTERM)
    # Draining: no new work, and the balancer is told at once.
    wait_for("py-a to report draining", lambda: True if cluster.workers()["py-a"]["state"] == "draining" else None, 5, 0.05)
    assert cluster.wait_exit("py-a", timeout=15) == 0
    (execution,) = cluster.executions(job)
    assert (execution["status"], execution["attempt"], execution["workerId"]) == ("succeeded", 1, "py-a")
    assert execution["output"] == {"slept_ms": 2000, "worker": "py-a"}
    cluster.wait_workers({"py-a"}, state="offline", timeout=5)


def test_sigterm_past_the_grace_period_reports_the_handler_failed(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a", KAIROS_WORKER_GRACE_MS="500")
    cluster.wait_workers({"py-a"})
    job = cluster.create_job({"jobName": "s", "jobHandler": "sleep", "params": {"ms": 60000}})
    cluster.wait_execution(job, {"running"}, timeout=20)
    cluster.signal("py-a", signal.SIGTERM)
    assert cluster.wait_exit("py-a", timeout=15) == 0
    execution = cluster.wait_execution(job, {"failed"}, timeout=10)
    assert (execution["attempt"], execution["error"]) == (1, SHUT_DOWN)
    cluster.wait_workers({"py-a"}, state="offline", timeout=5)
