"""End to end against the real dispatcher: success, failure with retries,
timeout, and registration through heartbeats."""

from __future__ import annotations

from harness import Cluster


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
