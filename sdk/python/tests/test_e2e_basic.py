"""End to end against the real dispatcher: success, failure with retries,
a permanent failure without them, timeout, and registration through heartbeats."""

from __future__ import annotations

from harness import Cluster, wait_for


def test_a_handler_output_is_stored(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a")
    cluster.wait_workers({"py-a"})
    job = cluster.create_job({"jobName": "echo", "jobHandler": "echo", "params": {"n": 7, "s": "héllo"}})
    cluster.wait_job(job, {"succeeded"})
    (execution,) = cluster.executions(job)
    assert execution["status"] == "succeeded"
    assert execution["workerId"] == "py-a"
    assert execution["attempt"] == 1
    assert execution["output"] == {"params": {"n": 7, "s": "héllo"}, "worker": "py-a", "attempt": 1}
    assert execution["startedAt"] is not None


def test_a_sharded_and_a_broadcast_job_tell_each_handler_its_shard(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a")
    cluster.spawn_worker("py-b")
    cluster.wait_workers({"py-a", "py-b"})
    sharded = cluster.create_job(
        {"jobName": "sharded", "jobHandler": "shard", "executionMode": "sharded", "shardCount": 4}
    )
    cluster.wait_job(sharded, {"succeeded"})
    runs = sorted((e["shardIndex"], e["shardCount"], e["output"]["index"], e["output"]["count"])
                  for e in cluster.executions(sharded))
    assert runs == [(i, 4, i, 4) for i in range(4)]
    # The dispatcher sees both workers once the API does (both read the
    # heartbeats they store) within its worker refresh; a broadcast claimed
    # before that would run once: wait until a single job has run on each.
    def both_seen() -> bool | None:
        job = cluster.create_job({"jobName": "probe", "jobHandler": "shard", "executionMode": "broadcast"})
        cluster.wait_job(job, {"succeeded"})
        return len(cluster.executions(job)) == 2 or None
    wait_for("a broadcast to reach both workers", both_seen)
    broadcast = cluster.create_job({"jobName": "broadcast", "jobHandler": "shard", "executionMode": "broadcast"})
    cluster.wait_job(broadcast, {"succeeded"})
    runs = sorted((e["shardIndex"], e["shardCount"], e["workerId"], e["output"]["index"])
                  for e in cluster.executions(broadcast))
    assert runs == [(0, 2, "py-a", 0), (1, 2, "py-b", 1)]


def test_a_failure_is_stored_and_retried_per_max_attempts(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a")
    cluster.wait_workers({"py-a"})
    failing = cluster.create_job(
        {"jobName": "fail", "jobHandler": "fail", "params": {"message": "boom"}, "maxAttempts": 2, "retryBackoffMs": 100}
    )
    flaky = cluster.create_job(
        {"jobName": "flaky", "jobHandler": "flaky", "params": {"failures": 1}, "maxAttempts": 3, "retryBackoffMs": 100}
    )
    cluster.wait_job(failing, {"failed"})
    (execution,) = cluster.executions(failing)
    assert (execution["status"], execution["attempt"], execution["error"]) == ("failed", 2, "boom")
    history = [(e["status"], e["attempt"]) for e in cluster.execution(execution["executionId"])["events"]]
    assert ("failed", 1) in history and ("pending", 2) in history, history

    # A plain exception fails the attempt with its type and message; the retry succeeds.
    cluster.wait_job(flaky, {"succeeded"})
    (execution,) = cluster.executions(flaky)
    assert (execution["status"], execution["attempt"], execution["output"]) == ("succeeded", 2, {"attempt": 2})
    events = cluster.execution(execution["executionId"])["events"]
    first = next(e for e in events if e["status"] == "failed")
    assert first["attempt"] == 1
    assert first["error"] == "ConnectionError: attempt 1 hit a flaky dependency"


def test_a_permanent_failure_is_not_retried(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a")
    cluster.wait_workers({"py-a"})
    job = cluster.create_job(
        {"jobName": "reject", "jobHandler": "reject", "params": {"message": "bad input"},
         "maxAttempts": 3, "retryBackoffMs": 100}
    )
    cluster.wait_job(job, {"failed"})
    (execution,) = cluster.executions(job)
    assert (execution["status"], execution["attempt"], execution["error"]) == ("failed", 1, "bad input")
    history = [(e["status"], e["attempt"]) for e in cluster.execution(execution["executionId"])["events"]]
    assert ("pending", 2) not in history, history


def test_a_handler_over_its_timeout_is_timed_out(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a")
    cluster.wait_workers({"py-a"})
    jobs = {
        handler: cluster.create_job(
            {"jobName": handler, "jobHandler": handler, "params": {"ms": 20000}, "timeoutMs": 500}
        )
        for handler in ("sleep", "sleep-sync")
    }
    for handler, job in jobs.items():
        cluster.wait_job(job, {"failed"}, timeout=15)
        (execution,) = cluster.executions(job)
        assert execution["status"] == "timed_out", (handler, execution)
        assert execution["error"] == "handler exceeded its timeout of 500 ms"
    # Both handlers were stopped, not left holding the pool: a new job runs at once.
    after = cluster.create_job({"jobName": "after", "jobHandler": "echo"})
    cluster.wait_job(after, {"succeeded"}, timeout=10)


def test_the_heartbeat_registers_the_worker_with_its_load(cluster: Cluster) -> None:
    cluster.spawn_worker("py-a", KAIROS_WORKER_CAPACITY="3", KAIROS_WORKER_GROUP="gpu")
    workers = cluster.wait_workers({"py-a"})
    w = workers["py-a"]
    assert w["capacity"] == 3
    assert w["queue"] == f"{cluster.namespace}.worker.py-a"
    assert 0.0 <= w["cpuIdle"] <= 100.0
    assert (w["active"], w["avgCostMs"]) == (0, 0.0)

    # While a handler runs the heartbeat counts it; afterwards its cost shows.
    job = cluster.create_job({"jobName": "s", "jobHandler": "sleep", "params": {"ms": 2500}})
    from harness import wait_for

    wait_for("the heartbeat to show one active handler", lambda: True if cluster.workers()["py-a"]["active"] == 1 else None, 10)
    cluster.wait_job(job, {"succeeded"})
    avg = wait_for(
        "the heartbeat to show the handler's cost",
        lambda: cluster.workers()["py-a"]["avgCostMs"] or None,
        10,
    )
    assert 2400 <= avg < 10000, avg
    assert cluster.workers()["py-a"]["active"] == 0
