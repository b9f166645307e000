"""A cluster's store whose head Ray is starting again is waited out, not taken for lost
(cluster/remote_store.py), and a write is never sent twice.

Why: Ray says ``ActorUnavailableError`` ("The actor is restarting.") of an actor unavailable
for now; the client took it for a lost store, so a CLI command made while the head restarted
failed (session 31: tests/cli/test_cli_cluster.py). A read is asked again within the call's
timeout; a write only when Ray refused it unsent; a write on its way when the head went may
have been committed, so it stays an ``UnsureWrite``.

The head here is a ``Head`` whose restart waits while a file exists: its restart is held
for as long as the test needs (no race with Ray's restart)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from raycluster import LocalCluster
from subagents.cluster.head import Head, head_actor
from subagents.cluster.remote_store import ClusterStore
from subagents.store.base import UnsureWrite

from .records import event, run

pytestmark = pytest.mark.ray

WAIT_S = 120.0


def _held_head(name: str, tmp_path: Path, stuck: Path) -> Any:
    """A head on ``tmp_path``'s file whose (re)start waits while ``stuck`` exists."""

    class HeldRestart(Head):
        def __init__(self, path: str | None, heartbeat_timeout_s: float = 15.0) -> None:
            import time

            while stuck.exists():  # (a restart held by the test)
                time.sleep(0.05)
            super().__init__(path, heartbeat_timeout_s)

        def pid(self) -> int:
            return os.getpid()

    return head_actor(name=name, path=str(tmp_path / "runs.sqlite3"), kind=HeldRestart)


def _in(thread: threading.Thread, function: str) -> bool:
    """Whether ``thread`` is inside ``remote_store``'s ``function`` now."""
    frame = sys._current_frames().get(thread.ident or -1)
    while frame is not None:
        name = (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)
        if name == ("remote_store.py", function):
            return True
        frame = frame.f_back
    return False


def _said_restarting(ray: Any, head: Any) -> bool:
    try:
        ray.get(head.protocol.remote(), timeout=WAIT_S)
    except ray.exceptions.ActorUnavailableError as exc:
        return "The actor is restarting." in str(exc)  # (Ray: refused unsent)
    return False


def test_a_read_and_a_write_wait_out_a_restarting_head_and_the_write_lands_once(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """Failed before the fix: both calls raised ``UnsureWrite`` ("was lost during ...: The
    actor is restarting.") at once, and the thread never waited."""
    import ray

    stuck = tmp_path / "stuck"
    head = _held_head("test-store-restarting", tmp_path, stuck)
    try:
        store = ClusterStore(head, name="test-store-restarting")
        store.save_run(run("before"))
        pid = ray.get(head.pid.remote(), timeout=WAIT_S)
        stuck.touch()
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: _said_restarting(ray, head), "Ray calling the head restarting")
        seen: list[object] = []

        def calls() -> None:
            try:
                seen.append(store.get_run("before"))
                store.append_event(event("during"))
                seen.append("written")
            except Exception as exc:
                seen.append(exc)

        caller = threading.Thread(target=calls, daemon=True)
        caller.start()
        wait_until(
            lambda: _in(caller, "_wait_out") or not caller.is_alive(),
            "the read waiting for the head",
        )
        assert caller.is_alive(), seen
        stuck.unlink()
        caller.join(WAIT_S)
        assert not caller.is_alive()
        assert seen == [run("before"), "written"], seen
        assert store.events("during") == [event("during")]  # once
    finally:
        stuck.unlink(missing_ok=True)
        ray.kill(head)


def test_a_write_on_its_way_when_the_head_dies_is_unsure_and_not_sent_again(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    """The write's fate is unknown (Ray sent it): it is an ``UnsureWrite``, never sent again
    to the restarted head (it would be written twice had the first reached the file)."""
    import ray

    stuck = tmp_path / "stuck"
    head = _held_head("test-store-unsure", tmp_path, stuck)
    try:
        store = ClusterStore(head, name="test-store-unsure")
        pid = ray.get(head.pid.remote(), timeout=WAIT_S)
        os.kill(pid, signal.SIGSTOP)
        seen: list[object] = []

        def write() -> None:
            try:
                store.append_event(event("on-its-way"))
                seen.append("written")
            except Exception as exc:
                seen.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        wait_until(lambda: _in(writer, "_get"), "the write sent, waiting for its answer")
        stuck.touch()
        os.kill(pid, signal.SIGKILL)
        writer.join(WAIT_S)
        assert not writer.is_alive()
        (said,) = seen
        assert isinstance(said, UnsureWrite), said
        assert "may or may not have been committed" in str(said), said
        stuck.unlink()
        assert store.events("on-its-way") == []  # (the stopped head never applied it)
    finally:
        stuck.unlink(missing_ok=True)
        ray.kill(head)
