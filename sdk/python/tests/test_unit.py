"""Unit tests of the pieces that need no services: message shapes, names,
load figures, configuration, log batching, one attempt's run (timeout, stop,
shutdown, sync and async handlers) and the places for accepted dispatches."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kairos_worker import PermanentError, RetryableError
from kairos_worker.config import ConfigError, check_id, default_id, resolve
from kairos_worker.context import JobContext
from kairos_worker.execute import run_attempt
from kairos_worker.load import CostWindow, CpuSampler, CpuTimes, idle_percent, parse_proc_stat
from kairos_worker.logship import BATCH_LINES, MAX_MESSAGE_CHARS, LogShipper
from kairos_worker.protocol import (
    Load,
    LogLine,
    MalformedDispatch,
    Names,
    check_level,
    check_progress,
    decode_dispatch,
    encode,
    heartbeat_message,
    log_message,
    result_message,
)
from kairos_worker.state import Places
from kairos_worker.worker import mask_password

# -- protocol --------------------------------------------------------------


def test_names_follow_the_namespace() -> None:
    n = Names("t1")
    assert n.dispatch_exchange == "t1.dispatch"
    assert (n.reroute_exchange, n.reroute_queue) == ("t1.reroute", "t1.reroute")
    assert (n.results_queue, n.heartbeats_queue, n.logs_queue) == ("t1.results", "t1.heartbeats", "t1.logs")
    assert n.worker_queue("w-1") == "t1.worker.w-1"
    assert n.attempt_key("e", 2) == "t1:attempt:e:2"
    assert n.stop_key("e", 2) == "t1:stop:e:2"
    assert Names().results_queue == "kairos.results"


DISPATCH = {
    "v": 1, "execution_id": "e", "job_id": "j", "attempt": 1, "handler": "noop",
    "params": {"a": [1, 2]}, "scheduled_at": 1767225600000, "timeout_ms": None,
}


def test_a_dispatch_is_decoded() -> None:
    d = decode_dispatch(json.dumps({**DISPATCH, "unknown_field": 1}).encode())
    assert (d.execution_id, d.job_id, d.attempt, d.handler) == ("e", "j", 1, "noop")
    assert (d.params, d.scheduled_at, d.timeout_ms, d.key) == ({"a": [1, 2]}, 1767225600000, None, ("e", 1))
    d = decode_dispatch(json.dumps({**DISPATCH, "timeout_ms": 500}).encode())
    assert d.timeout_ms == 500


def test_a_dispatch_carries_its_shard_and_a_single_job_is_shard_0_of_1() -> None:
    assert decode_dispatch(json.dumps(DISPATCH).encode()).shard_index == 0
    single = decode_dispatch(json.dumps(DISPATCH).encode())
    assert (single.shard_index, single.shard_count) == (0, 1)
    d = decode_dispatch(json.dumps({**DISPATCH, "shard": {"index": 3, "count": 8}}).encode())
    assert (d.shard_index, d.shard_count) == (3, 8)
    for bad in ({"index": 8, "count": 8}, {"index": 0, "count": 0}, {"index": -1, "count": 2},
                {"index": "1", "count": 2}, [0, 1]):
        with pytest.raises(MalformedDispatch, match="shard"):
            decode_dispatch(json.dumps({**DISPATCH, "shard": bad}).encode())


async def test_the_context_tells_a_handler_its_shard() -> None:
    ctx = _ctx(None)
    assert ctx.shard() == (0, 1)
    ctx = JobContext(
        execution_id="e", job_id="j", attempt=1, handler="h", worker_id="w",
        scheduled_at_ms=0, timeout_ms=None, deadline=None, _sink=_Sink(),
        shard_index=3, shard_count=8,
    )

    def handler(c: JobContext, params: Any) -> Any:
        return list(c.shard())

    report, _ = await run_attempt(handler, ctx, None, asyncio.Event(), asyncio.Event())
    assert (report.kind, report.output) == ("succeeded", [3, 8])


def test_a_workflow_node_dispatch_carries_its_parents_outputs() -> None:
    assert decode_dispatch(json.dumps(DISPATCH).encode()).parent_outputs is None
    outputs = {"extract": {"rows": 3}, "check": None}
    d = decode_dispatch(json.dumps({**DISPATCH, "parent_outputs": outputs}).encode())
    assert d.parent_outputs == outputs
    with pytest.raises(MalformedDispatch, match="parent_outputs"):
        decode_dispatch(json.dumps({**DISPATCH, "parent_outputs": [1]}).encode())


async def test_the_context_hands_a_node_its_parents_outputs() -> None:
    assert _ctx(None).parent_outputs() is None
    ctx = JobContext(
        execution_id="e", job_id="j", attempt=1, handler="h", worker_id="w",
        scheduled_at_ms=0, timeout_ms=None, deadline=None, _sink=_Sink(),
        _parent_outputs={"b1": 1, "b2": 2},
    )

    def handler(c: JobContext, params: Any) -> Any:
        return sum((c.parent_outputs() or {}).values())

    report, _ = await run_attempt(handler, ctx, None, asyncio.Event(), asyncio.Event())
    assert (report.kind, report.output) == ("succeeded", 3)


@pytest.mark.parametrize("group", ["gpu", None])
def test_a_dispatch_naming_a_worker_group_is_run_like_any_other(group: str | None) -> None:
    # Dispatchers send a job with a `workerGroup` only to workers of that
    # group: the field is informative, and a worker runs the dispatch as is.
    d = decode_dispatch(json.dumps({**DISPATCH, "group": group}).encode())
    assert (d.execution_id, d.attempt, d.handler, d.params) == ("e", 1, "noop", {"a": [1, 2]})


@pytest.mark.parametrize(
    "body, why",
    [
        (b"{", "not JSON"),
        (b"[1]", "not a JSON object"),
        (json.dumps({**DISPATCH, "v": 2}).encode(), "unsupported protocol version 2"),
        (json.dumps({k: v for k, v in DISPATCH.items() if k != "v"}).encode(), '"v"'),
        (json.dumps({**DISPATCH, "v": True}).encode(), '"v"'),
        (json.dumps({**DISPATCH, "attempt": "1"}).encode(), "attempt"),
        (json.dumps({**DISPATCH, "attempt": -1}).encode(), "attempt"),
        (json.dumps({k: v for k, v in DISPATCH.items() if k != "handler"}).encode(), "handler"),
        (json.dumps({**DISPATCH, "timeout_ms": 1.5}).encode(), "timeout_ms"),
        (json.dumps({**DISPATCH, "scheduled_at": None}).encode(), "scheduled_at"),
    ],
)
def test_bad_dispatches_are_refused(body: bytes, why: str) -> None:
    with pytest.raises(MalformedDispatch, match=why):
        decode_dispatch(body)


def test_result_json_is_the_documented_shape_plus_incarnation() -> None:
    msg = json.loads(encode(result_message(
        execution_id="e", attempt=2, worker_id="w", incarnation="inc", kind="timed_out", error="late", at=7,
    )))
    assert msg == {
        "v": 1, "execution_id": "e", "attempt": 2, "worker_id": "w", "kind": "timed_out",
        "output": None, "error": "late", "at": 7, "incarnation": "inc",
    }
    now = result_message(execution_id="e", attempt=1, worker_id="w", incarnation="i", kind="started")["at"]
    assert abs(now - time.time() * 1000) < 5000


def test_a_permanent_failure_says_it_is_not_retryable() -> None:
    msg = json.loads(encode(result_message(
        execution_id="e", attempt=1, worker_id="w", incarnation="inc", kind="failed", error="bad params",
        retryable=False, at=7,
    )))
    assert msg == {
        "v": 1, "execution_id": "e", "attempt": 1, "worker_id": "w", "kind": "failed",
        "output": None, "error": "bad params", "retryable": False, "at": 7, "incarnation": "inc",
    }
    unsaid = result_message(execution_id="e", attempt=1, worker_id="w", incarnation="i", kind="failed", error="x")
    assert "retryable" not in unsaid, "absent unless the handler said so"


def test_heartbeat_json_has_load_figures_handlers_group_and_held() -> None:
    msg = json.loads(encode(heartbeat_message(
        worker_id="w-1", queue="kairos.worker.w-1", capacity=16, load=Load(3, 120.5, 71.0), state="draining",
        incarnation="inc", handlers=["b", "a"], group=None, held=[("e1", 1), ("e2", 3)], at=9,
    )))
    assert msg == {
        "v": 1, "worker_id": "w-1", "queue": "kairos.worker.w-1", "capacity": 16, "active": 3,
        "avg_cost_ms": 120.5, "cpu_idle": 71.0, "state": "draining", "at": 9, "incarnation": "inc",
        "handlers": ["a", "b"], "group": None,
        "held": [{"execution_id": "e1", "attempt": 1}, {"execution_id": "e2", "attempt": 3}],
    }


def test_log_json_carries_progress_only_when_given() -> None:
    lines = [LogLine(at=5, level="warn", message="x")]
    msg = log_message(execution_id="e", attempt=1, worker_id="w", lines=lines, progress=50.0)
    assert msg == {"v": 1, "execution_id": "e", "attempt": 1, "worker_id": "w",
                   "lines": [{"at": 5, "level": "warn", "message": "x"}], "progress": 50.0}
    assert "progress" not in log_message(execution_id="e", attempt=1, worker_id="w", lines=lines, progress=None)


def test_non_json_values_are_refused_when_encoding() -> None:
    with pytest.raises(ValueError):
        encode({"x": math.nan})


def test_progress_and_levels_are_checked() -> None:
    assert check_progress(0) == 0.0 and check_progress(100) == 100.0
    for bad in (-1, 100.5, math.nan, math.inf):
        with pytest.raises(ValueError):
            check_progress(bad)
    assert check_level("WARNING") == "warn" and check_level("debug") == "debug"
    with pytest.raises(ValueError):
        check_level("loud")


# -- load figures ------------------------------------------------------------


def test_the_cost_window_is_the_mean_of_the_last_hundred_runs() -> None:
    w = CostWindow()
    assert w.mean() == 0.0
    w.record(10.0)
    w.record(30.0)
    assert w.mean() == 20.0
    for _ in range(100):
        w.record(5.0)
    assert w.mean() == 5.0
    for _ in range(50):
        w.record(15.0)
    assert w.mean() == 10.0


STAT_A = "cpu  100 0 50 800 50 0 0 0 7 7\ncpu0 1 2 3 4 5 6 7 8\nintr 1 2\n"
STAT_B = "cpu  160 0 70 860 60 0 0 10 9 9\ncpu0 1 2 3 4 5 6 7 8\n"


def test_proc_stat_is_read_from_the_aggregate_line() -> None:
    # idle = idle + iowait; guest columns are already inside user/nice.
    assert parse_proc_stat(STAT_A) == CpuTimes(idle=850, total=1000)
    assert parse_proc_stat(STAT_B) == CpuTimes(idle=920, total=1160)
    # Deltas: idle 70 of 160 jiffies.
    assert idle_percent(parse_proc_stat(STAT_A), parse_proc_stat(STAT_B)) == pytest.approx(43.75)
    assert idle_percent(CpuTimes(1, 2), CpuTimes(1, 2)) is None
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1 2\n")


def test_the_cpu_sampler_reports_idle_between_calls(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(STAT_A)
    sampler = CpuSampler(str(stat))
    stat.write_text(STAT_B)
    assert sampler.idle() == pytest.approx(43.75)
    # No ticks since: the previous figure stands.
    assert sampler.idle() == pytest.approx(43.75)


def test_the_real_cpu_idle_is_a_percentage() -> None:
    sampler = CpuSampler()
    for _ in range(3):
        time.sleep(0.05)
        assert 0.0 <= sampler.idle() <= 100.0


# -- configuration -------------------------------------------------------------

ENV = {"KAIROS_AMQP_URL": "amqp://x", "KAIROS_REDIS_URL": "redis://y"}


def test_arguments_win_over_the_environment_which_wins_over_defaults() -> None:
    cfg = resolve(env={**ENV, "KAIROS_WORKER_CAPACITY": "4", "KAIROS_WORKER_ID": "env-id"})
    assert (cfg.capacity, cfg.buffer, cfg.worker_id, cfg.namespace) == (4, 4, "env-id", "kairos")
    assert (cfg.heartbeat_ms, cfg.grace_ms, cfg.stop_poll_ms, cfg.group) == (3000, 30000, 250, None)
    cfg = resolve(capacity=2, buffer=0, worker_id="arg-id", namespace="ns", group="g",
                  env={**ENV, "KAIROS_WORKER_CAPACITY": "4"})
    assert (cfg.capacity, cfg.buffer, cfg.worker_id, cfg.namespace, cfg.group) == (2, 0, "arg-id", "ns", "g")


@pytest.mark.parametrize(
    "kwargs, env, why",
    [
        ({}, {"KAIROS_REDIS_URL": "r"}, "RabbitMQ"),
        ({}, {"KAIROS_AMQP_URL": "a"}, "Redis"),
        ({"capacity": 0}, ENV, "at least 1"),
        ({}, {**ENV, "KAIROS_WORKER_CAPACITY": "many"}, "not an integer"),
        ({"capacity": 60000, "buffer": 6000}, ENV, "65535"),
        ({"worker_id": "a b"}, ENV, "worker id"),
    ],
)
def test_bad_configuration_is_refused(kwargs: dict[str, Any], env: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        resolve(env=env, **kwargs)


def test_default_ids_are_queue_safe_and_distinct() -> None:
    a, b = default_id(), default_id()
    assert check_id(a) == a and a != b


def test_passwords_are_masked() -> None:
    assert mask_password("amqp://u:s3cret@h:5672/%2f") == "amqp://u:***@h:5672/%2f"
    assert mask_password("redis://:s3cret@h/0") == "redis://:***@h/0"
    assert mask_password("redis://h:6379/2") == "redis://h:6379/2"


# -- log batching ----------------------------------------------------------------


async def test_log_lines_are_batched_per_attempt_with_the_latest_progress() -> None:
    sent: list[dict[str, Any]] = []

    async def publish(body: bytes) -> None:
        sent.append(json.loads(body))

    shipper = LogShipper("w-1", publish)
    for i in range(BATCH_LINES + 5):
        shipper.add_line("e1", 1, "info", f"l{i}")
    shipper.set_progress("e1", 1, 10.0)
    shipper.set_progress("e1", 1, 60.0)
    shipper.set_progress("e2", 2, 5.0)
    shipper.add_line("e3", 1, "debug", "x" * 20000)
    await shipper.flush()
    e1 = [m for m in sent if m["execution_id"] == "e1"]
    assert [len(m["lines"]) for m in e1] == [BATCH_LINES, 5]
    assert [ln["message"] for m in e1 for ln in m["lines"]] == [f"l{i}" for i in range(BATCH_LINES + 5)]
    assert "progress" not in e1[0] and e1[1]["progress"] == 60.0
    (e2,) = [m for m in sent if m["execution_id"] == "e2"]
    assert (e2["attempt"], e2["lines"], e2["progress"], e2["worker_id"]) == (2, [], 5.0, "w-1")
    (e3,) = [m for m in sent if m["execution_id"] == "e3"]
    assert len(e3["lines"][0]["message"]) == MAX_MESSAGE_CHARS, "a huge line is cut"
    sent.clear()
    await shipper.flush()
    assert sent == [], "nothing new, nothing sent"


async def test_log_shipping_is_best_effort() -> None:
    calls = 0

    async def broken(body: bytes) -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("broker down")

    shipper = LogShipper("w", broken)
    shipper.add_line("e", 1, "info", "x" * 20000)
    await shipper.flush()  # does not raise
    assert calls == 3


async def test_the_shipper_flushes_on_its_own_and_when_a_batch_fills() -> None:
    got = asyncio.Event()
    sent: list[dict[str, Any]] = []

    async def publish(body: bytes) -> None:
        sent.append(json.loads(body))
        got.set()

    shipper = LogShipper("w", publish)
    stop = asyncio.Event()
    runner = asyncio.create_task(shipper.run(stop))
    await asyncio.sleep(0)
    # From a thread, as a sync handler would.
    threading.Thread(target=lambda: shipper.add_line("e", 1, "error", "from a thread")).start()
    await asyncio.wait_for(got.wait(), 2)
    assert sent[0]["lines"][0]["message"] == "from a thread"
    shipper.add_line("e", 1, "info", "last")
    stop.set()
    await runner
    assert sent[-1]["lines"][-1]["message"] == "last", "stopping flushes what is left"


# -- one attempt ---------------------------------------------------------------------


class _Sink:
    def add_line(self, execution_id: str, attempt: int, level: str, message: str) -> None: ...
    def set_progress(self, execution_id: str, attempt: int, pct: float) -> None: ...


def _ctx(timeout_ms: int | None = None) -> JobContext:
    return JobContext(
        execution_id="e", job_id="j", attempt=1, handler="h", worker_id="w",
        scheduled_at_ms=0, timeout_ms=timeout_ms, deadline=None, _sink=_Sink(),
    )


async def _run(fn: Any, timeout_ms: int | None = None, stop_after: float | None = None,
               hard_after: float | None = None) -> tuple[Any, JobContext]:
    ctx, stop, hard = _ctx(timeout_ms), asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    if stop_after is not None:
        loop.call_later(stop_after, stop.set)
    if hard_after is not None:
        loop.call_later(hard_after, hard.set)
    report, _ = await run_attempt(fn, ctx, {"p": 1}, stop, hard)
    return report, ctx


async def test_async_and_sync_handlers_succeed_with_their_output() -> None:
    async def a(ctx: JobContext, params: Any) -> Any:
        return {"got": params}

    def s(ctx: JobContext, params: Any) -> Any:
        assert threading.current_thread() is not threading.main_thread()
        return [params]

    assert (await _run(a))[0].output == {"got": {"p": 1}}
    report, _ = await _run(s)
    assert (report.kind, report.output) == ("succeeded", [{"p": 1}])


async def test_failures_are_reported_with_their_message() -> None:
    async def retryable(ctx: JobContext, params: Any) -> None:
        raise RetryableError("try later")

    def plain(ctx: JobContext, params: Any) -> None:
        raise KeyError("k")

    async def not_json(ctx: JobContext, params: Any) -> Any:
        return {1, 2}

    async def permanent(ctx: JobContext, params: Any) -> None:
        raise PermanentError("width must be positive")

    def permanent_sync(ctx: JobContext, params: Any) -> None:
        raise PermanentError("no such file")

    report = (await _run(retryable))[0]
    assert (report.kind, report.error, report.retryable) == ("failed", "try later", None)
    report = (await _run(plain))[0]
    assert (report.error, report.retryable) == ("KeyError: 'k'", None)
    report = (await _run(permanent))[0]
    assert (report.kind, report.error, report.retryable) == ("failed", "width must be positive", False)
    report = (await _run(permanent_sync))[0]
    assert (report.kind, report.error, report.retryable) == ("failed", "no such file", False)
    report, _ = await _run(not_json)
    assert report.kind == "failed" and report.error is not None and report.error.startswith("handler output is not JSON")


async def test_a_slow_handler_is_timed_out_and_cancelled() -> None:
    seen: list[str] = []

    async def slow(ctx: JobContext, params: Any) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(f"cancelled {ctx.cancelled} {ctx.cancel_reason}")
            raise

    started = time.monotonic()
    report, ctx = await _run(slow, timeout_ms=100)
    assert report.kind == "timed_out" and report.error == "handler exceeded its timeout of 100 ms"
    assert seen == ["cancelled True timeout"]
    assert time.monotonic() - started < 2


async def test_a_sync_handler_learns_of_a_stop_through_its_context() -> None:
    def polling(ctx: JobContext, params: Any) -> str:
        if ctx.wait_cancelled_blocking(30):
            raise RuntimeError("stopping")  # its own failure must not win
        return "finished"

    report, ctx = await _run(polling, stop_after=0.1)
    assert (report.kind, report.error, ctx.cancel_reason) == ("failed", "stopped at the scheduler's request", "stop")


async def test_the_end_of_the_grace_period_fails_a_running_handler() -> None:
    async def slow(ctx: JobContext, params: Any) -> None:
        await ctx.wait_cancelled()

    report, _ = await _run(slow, hard_after=0.05)
    assert report.error == "worker shut down before the handler finished"


async def test_a_handler_that_finishes_first_keeps_its_outcome() -> None:
    async def quick(ctx: JobContext, params: Any) -> str:
        return "done"

    report, ctx = await _run(quick, timeout_ms=10_000, stop_after=5)
    assert (report.kind, report.output, ctx.cancelled) == ("succeeded", "done", False)


# -- places ------------------------------------------------------------------------------


async def test_a_full_worker_waits_briefly_for_a_place() -> None:
    places, never = Places(1), asyncio.Event()
    assert await places.take_within(0.1, never)
    started = time.monotonic()
    assert not await places.take_within(0.1, never)
    assert 0.09 <= time.monotonic() - started < 0.5
    asyncio.get_running_loop().call_later(0.03, places.give_back)
    assert await places.take_within(0.5, never), "a place given back within the wait is taken"
