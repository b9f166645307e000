"""A node host keeps its driver's lease line (``cluster/node_lease.py``): the answer to each
ask is published on the node's clock no later than the driver's line (the node's reading is
taken before it asks); the node's processes are given the line at its first publication
only (a driver that keeps none gives none); an ask unanswered publishes nothing, so the
line last published stands and passes. Without threads: ``renew`` is one ask; the reaper's
side is tests/tools/test_bash_lease_line.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pykka
import pytest

from subagents.cluster.node_lease import LEAST_S, MOST_S, NodeLease
from subagents.tools.lease_line import LeaseLine, clock


class Driver:
    """What the node asks: answers ``left`` (None: no line), or raises when it is silent;
    notes the node-clock time at which each ask reached it."""

    def __init__(self) -> None:
        self.left: float | None = 5.0
        self.silent = False
        self.asked_at: list[float] = []

    def __call__(self, timeout: float) -> float | None:
        assert timeout > 0
        self.asked_at.append(clock())
        if self.silent:
            raise pykka.Timeout(f"no answer from the supervisor within {timeout} s")
        return self.left


@pytest.fixture
def driver() -> Driver:
    return Driver()


@pytest.fixture
def given() -> list[LeaseLine]:
    return []


@pytest.fixture
def lease(driver: Driver, given: list[LeaseLine]) -> Iterator[NodeLease]:
    made = NodeLease(driver, given.append)  # (not started: ``renew`` by hand)
    yield made
    made.close()


def published(lease: NodeLease) -> float | None:
    """The line as a reaper reads it (``reaper._deadline``), or None when none was written."""
    data = os.pread(lease.line.reader, 16, 0)
    if not data:
        return None
    assert data[:8] == data[8:]
    return int.from_bytes(data[:8], "little") / 1e9


def test_the_nodes_line_is_no_later_than_the_drivers(lease: NodeLease, driver: Driver) -> None:
    """The driver's line is ``left`` after it read its clock, which is after the ask left
    the node: the node's line may be earlier, never later."""
    wait = lease.renew()
    at = published(lease)
    assert at is not None and at <= driver.asked_at[0] + 5.0 + 1e-9
    assert wait == MOST_S  # (5 s left: asked again within a second)
    driver.left = 0.2  # a lease of a second, as the tests' drivers keep
    assert lease.renew() == pytest.approx(0.1)  # (again at half of what was left)
    later = published(lease)
    assert later is not None and later <= driver.asked_at[1] + 0.2 + 1e-9


def test_the_line_is_given_at_its_first_publication_only(
    lease: NodeLease, driver: Driver, given: list[LeaseLine]
) -> None:
    """No line kept by the driver: nothing published, nothing given (a line never written
    would kill every command at once); then given once."""
    driver.left = None
    assert lease.renew() == LEAST_S  # (not yet: asked again soon)
    assert published(lease) is None and given == []
    driver.left = 5.0
    lease.renew()
    lease.renew()
    assert given == [lease.line] and published(lease) is not None


def test_an_unanswered_ask_leaves_the_last_line_to_pass(lease: NodeLease, driver: Driver) -> None:
    """The driver stalled: its silence publishes nothing; the line last published stands
    (and passes); the node asks again soon."""
    driver.left = 0.5
    lease.renew()
    before = published(lease)
    driver.silent = True
    assert lease.renew() == LEAST_S
    assert published(lease) == before
    driver.silent, driver.left = False, -100.0  # (late: the driver's line passed long ago)
    lease.renew()
    at = published(lease)
    assert at is not None and before is not None and at < before
