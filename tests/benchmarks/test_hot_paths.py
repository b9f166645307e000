"""Hot-path shortcuts taken for the benchmarks keep their behaviour.

The slot pool checks each distinct queued key once per scan instead of every queued run, and
debug log lines are skipped when structlog would filter them out anyway.
"""

from __future__ import annotations

import io
import logging

import structlog

from subagents.logs import configure, debug_enabled, enabled, get_logger
from subagents.supervision.slots import SlotKey, SlotPool


def key(agent: str, tier: int | None = None, agent_limit: int = 10) -> SlotKey:
    return SlotKey(agent=agent, tier=tier, agent_limit=agent_limit)


def test_many_queued_runs_of_a_blocked_agent_do_not_hold_up_a_later_run_of_another() -> None:
    pool = SlotPool(global_limit=10, per_tier={}, queue_bound=1000)
    a = key("a", agent_limit=2)
    assert pool.try_take("a0", a) and pool.try_take("a1", a)
    for i in range(2, 500):
        pool.enqueue(f"a{i}", a)
    pool.enqueue("b0", key("b"))
    pool.release("a300")  # a queued run leaving the queue
    assert pool.start_queued() == ["b0"]  # nothing freed for "a"; "b" fits
    assert pool.release("a0")
    assert pool.start_queued() == ["a2"]
    assert pool.release("a2")
    assert pool.start_queued() == ["a3"]
    assert len(pool.queued()) == 495
    # a new "a" run must not overtake the queued ones once a slot frees
    assert pool.release("a1")
    assert not pool.try_take("late", a)
    assert pool.start_queued() == ["a4"]


def test_queue_counts_stay_right_when_queued_runs_start_or_leave() -> None:
    pool = SlotPool(global_limit=1, per_tier={}, queue_bound=10)
    assert pool.try_take("r0", key("a"))
    pool.enqueue("r1", key("a"))
    pool.enqueue("r2", key("b"))
    pool.release("r1")
    assert pool.release("r0")
    assert pool.start_queued() == ["r2"]
    assert pool.queued() == []
    assert pool.release("r2")
    assert pool.try_take("r3", key("a"))  # nothing left queued to go first


def test_debug_enabled_follows_structlog_reconfiguration() -> None:
    old = structlog.get_config()
    try:
        configure(level="error", stream=io.StringIO())
        assert debug_enabled() is False
        out = io.StringIO()
        configure(level="debug", stream=out)
        assert debug_enabled() is True
        structlog.get_logger("t").debug("seen")
        assert "seen" in out.getvalue()
        configure(level="warning", stream=io.StringIO())
        assert debug_enabled() is False
    finally:
        structlog.configure(**old)


def test_debug_enabled_follows_a_level_set_through_structlog_itself() -> None:
    """The answer ``debug_enabled`` keeps (``logs._LAST``) is for one wrapper class: a host
    calling structlog's own ``configure`` (logs.py is not told) is answered for its level
    at the next ask, however often the old level was asked before."""
    old = structlog.get_config()
    try:
        configure(level="warning", stream=io.StringIO())
        assert [debug_enabled() for _ in range(3)] == [False] * 3
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
        assert debug_enabled() is True and debug_enabled() is True
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
        assert debug_enabled() is False and enabled(logging.INFO) is True
        assert debug_enabled() is False  # asked again after another level's answer
    finally:
        structlog.configure(**old)


def test_enabled_answers_per_level_and_follows_reconfiguration() -> None:
    """``enabled(level)`` (asked before a park's info line): each level its own answer,
    not the first one asked remembered for every level."""
    old = structlog.get_config()
    try:
        configure(level="info", stream=io.StringIO())
        assert enabled(logging.DEBUG) is False
        assert enabled(logging.INFO) is True and enabled(logging.WARNING) is True
        configure(level="warning", stream=io.StringIO())
        assert enabled(logging.INFO) is False and enabled(logging.ERROR) is True
        configure(level="info", stream=io.StringIO())
        assert enabled(logging.INFO) is True
    finally:
        structlog.configure(**old)


def test_enabled_follows_the_stdlib_levels_of_a_host() -> None:
    """A host that sends structlog through stdlib logging sets its levels there, when it likes
    and per logger name: the park's info line (``subagents.supervisor``) is asked about with
    ``enabled(logging.INFO)`` first, and must be written whenever that logger lets info
    through. (structlog 26.1's stdlib ``BoundLogger`` answers ``is_enabled_for``: an answer
    remembered per wrapper class, or asked of another logger's name, dropped the line.)"""
    old = structlog.get_config()
    package, supervisor = logging.getLogger("subagents"), logging.getLogger("subagents.supervisor")
    saved = [(lg, lg.level, lg.propagate) for lg in (package, supervisor)]
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    try:
        structlog.configure(
            processors=[structlog.stdlib.filter_by_level, structlog.processors.KeyValueRenderer()],
            wrapper_class=structlog.stdlib.BoundLogger,
            logger_factory=structlog.stdlib.LoggerFactory(),
            cache_logger_on_first_use=False,
        )
        package.addHandler(handler)
        package.propagate = False
        package.setLevel(logging.WARNING)
        supervisor.setLevel(logging.NOTSET)
        enabled(logging.INFO)  # asked while info is off (either answer drops nothing)
        package.setLevel(logging.INFO)  # the host turns info on
        assert enabled(logging.INFO) is True
        package.setLevel(logging.WARNING)
        supervisor.setLevel(logging.INFO)  # only for the supervisor's lines
        assert enabled(logging.INFO) is True
        if enabled(logging.INFO):  # as parking.Parking.parked writes its line
            get_logger("subagents.supervisor").info("a waiting run lent its slot")
        assert "a waiting run lent its slot" in lines.getvalue()
    finally:
        package.removeHandler(handler)
        for lg, level, propagate in saved:
            lg.setLevel(level)
            lg.propagate = propagate
        structlog.configure(**old)
