"""Fixtures: `cluster` starts a fresh Kairos cluster (see harness.py) per test."""

from __future__ import annotations

from typing import Any, Generator, Iterator

import pytest

from harness import Cluster


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    # Lets the fixture keep the logs of a failed test.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    c = Cluster().start()
    try:
        yield c
    finally:
        rep = getattr(request.node, "rep_call", None)
        c.close(failed=rep is None or rep.failed)
