"""ClusterStore on the session's cluster: batches sent whole, reads inside them, the store's
actor restarted by Ray on the same file, wrong names and paths refused."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from polling import wait_until
from raycluster import LocalCluster
from subagents.cluster.connect import ClusterError
from subagents.cluster.head import head_actor
from subagents.cluster.remote_store import ClusterStore, open_cluster_store
from subagents.cluster.store_service import PROTOCOL
from subagents.store.base import StoreError

from .records import event, run

pytestmark = pytest.mark.ray

WAIT_S = 30.0


@pytest.fixture(scope="module")
def served(ray_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One store actor for this module (each test uses run ids of its own)."""
    import ray

    path = tmp_path_factory.mktemp("cluster-store") / "runs.sqlite3"
    actor = head_actor(name="test-cluster-store", path=str(path))
    yield actor
    ray.kill(actor)


@pytest.fixture
def store(served: Any) -> ClusterStore:
    return ClusterStore(served, name="test-cluster-store")


def test_a_batch_is_sent_whole_when_it_ends(store: ClusterStore, served: Any) -> None:
    other = ClusterStore(served, name="test-cluster-store")  # another process's view
    with store.batch():
        store.save_run(run("b1"))
        store.append_event(event("b1"))
        assert other.get_run("b1") is None  # held here: nothing sent yet
        assert store.get_run("b1") == run("b1")  # but this batch reads its own writes
    assert other.get_run("b1") == run("b1")
    assert other.events("b1") == [event("b1")]


def test_a_batch_that_raises_sends_nothing_and_a_nested_one_drops_only_its_own(
    store: ClusterStore,
) -> None:
    with pytest.raises(RuntimeError), store.batch():
        store.save_run(run("n1"))
        raise RuntimeError("boom")
    assert store.get_run("n1") is None
    with store.batch():
        store.save_run(run("n2"))
        with pytest.raises(RuntimeError), store.batch():
            store.save_run(run("n3"))
            raise RuntimeError("boom")
        store.append_event(event("n2"))
    assert store.get_run("n2") == run("n2")
    assert store.get_run("n3") is None
    assert store.events("n2") == [event("n2")]


def test_a_command_posted_inside_a_batch_commits_with_it_and_a_claim_commits_with_it(
    store: ClusterStore,
) -> None:
    with pytest.raises(RuntimeError), store.batch():  # held: a failed batch posts nothing
        store.save_run(run("c0"))
        assert store.post_command("stop", "c0") == 0
        raise RuntimeError("the batch fails")
    assert store.take_commands(["c0"]) == []
    with store.batch():
        store.save_run(run("c1"))
        assert store.post_command("send", "c1", "held") == 0  # its id: known once committed
    posted = store.take_commands(["c1"])
    assert [(c.kind, c.content) for c in posted] == [("send", "held")]
    command = store.post_command("stop", "c1")
    with store.batch():  # the supervisor's way: claim, then act, in one batch
        store.save_run(run("c2"))
        claimed = store.take_commands(["c1"])
        assert store.get_run("c2") == run("c2")  # committed with the claim
        store.append_event(event("c2"))
        with pytest.raises(RuntimeError), store.batch():
            store.save_run(run("c3"))
            raise RuntimeError("boom")
    assert [c.command_id for c in claimed] == [command]
    assert store.take_commands(["c1"]) == []
    assert store.events("c2") == [event("c2")]
    assert store.get_run("c3") is None


def test_a_closed_client_refuses_and_the_store_keeps_serving(store: ClusterStore, served: Any):
    store.close()
    with pytest.raises(StoreError, match="this client was closed"):
        store.get_run("x")
    assert ClusterStore(served, name="test-cluster-store").get_run("x") is None


def test_the_store_actor_comes_back_on_the_same_file_after_its_process_is_killed(
    store: ClusterStore, served: Any
) -> None:
    import ray

    store.save_run(run("k1"))
    before = ray.get(served.info.remote(PROTOCOL))
    os.kill(before.pid, signal.SIGKILL)  # the head is this machine: its worker is a process here
    answers: list[Any] = []

    def back() -> bool:  # Ray restarts it (max_restarts=-1); calls fail until it is back
        try:
            answers.append(ray.get(served.info.remote(PROTOCOL), timeout=10))
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return False
        return True

    wait_until(back, "the store actor back", pace=0.0)
    after = answers[0]
    assert after.pid != before.pid and after.path == before.path
    assert ClusterStore(served, name="test-cluster-store").get_run("k1") == run("k1")


def test_a_running_store_is_not_switched_to_another_file(served: Any, tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"serves .*runs\.sqlite3, not .*other\.sqlite3"):
        head_actor(name="test-cluster-store", path=str(tmp_path / "other.sqlite3"))


def test_a_missing_store_is_an_error_that_says_what_to_do(ray_cluster: LocalCluster) -> None:
    with pytest.raises(ClusterError, match="no subagents store 'nobody' on this Ray cluster"):
        open_cluster_store(ray_cluster.address, name="nobody")


def test_a_batch_is_the_threads_that_opened_it(store: ClusterStore, served: Any) -> None:
    """The supervisor's batch open on one thread: another thread of the same client (a rule
    read, ``Runtime.approvals()``) neither reads its uncommitted writes nor has its own
    writes held in it (they are committed at once); the batch is still sent whole."""
    other = ClusterStore(served, name="test-cluster-store")  # another process's view
    opened, finish = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def supervisor() -> None:
        try:
            with store.batch():
                store.save_run(run("t1"))
                opened.set()
                assert finish.wait(WAIT_S)
                assert store.get_run("t1") == run("t1")  # its own writes, still
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=supervisor, name="test-batch-owner")
    thread.start()
    try:
        assert opened.wait(WAIT_S)
        assert store.get_run("t1") is None  # not this thread's batch: uncommitted
        store.save_run(run("t2"))  # not held in that batch: committed at once
        assert other.get_run("t2") == run("t2")
        assert other.get_run("t1") is None
    finally:
        finish.set()
        thread.join(WAIT_S)
    assert not thread.is_alive() and errors == []
    assert other.get_run("t1") == run("t1")


def _older_head() -> type:
    """The head class of a subagents of before session 27, as far as a client sees it: every
    method of today's ``Head`` but ``protocol`` (its store calls of then are not reproduced:
    the client stops before any)."""
    from subagents.cluster.head import Head

    methods = {
        k: v for k, v in vars(Head).items() if k not in ("protocol", "__dict__", "__weakref__")
    }

    def info(self: Any) -> Any:  # (its callers said no protocol)
        return self.service.info()

    return type("OlderHead", (), {**methods, "info": info})


def test_a_head_of_another_protocol_is_refused_naming_both_versions(
    served: Any, tmp_path: Path
) -> None:
    """A detached head outlives its driver: an upgraded driver reaching the old head had its
    recovery retry, for ever, a read the old head refused (``get_runs``), and an old driver
    misread the new head's damaged rows. A client now refuses a head of another protocol at
    its start, saying which each side runs and what to do; nothing is written. (A head
    started with a path is checked so as it starts: ``head_actor``.)"""
    import ray

    from subagents.cluster.connect import NAMESPACE
    from subagents.cluster.head import Head

    class Newer(Head):
        def protocol(self) -> int:
            return PROTOCOL + 1

    for n, (kind, said) in enumerate(
        [
            (_older_head(), "a subagents older than this one (no protocol version)"),
            (Newer, f"protocol {PROTOCOL + 1}"),
        ]
    ):
        name = f"test-cluster-protocol-{n}"
        path = tmp_path / f"runs-{n}.sqlite3"
        try:
            with pytest.raises(ClusterError) as started:
                head_actor(name=name, path=str(path), kind=kind)
            actor = ray.get_actor(name, namespace=NAMESPACE)
            with pytest.raises(ClusterError) as refused:
                ClusterStore(actor, name=name)
            for error in (started.value, refused.value):
                assert str(error).startswith(
                    f"the cluster's store {name!r} is served by a head running {said}; this"
                    f" process runs protocol {PROTOCOL}: a head and the processes using it"
                    " must run the same subagents."
                ), error
        finally:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE))
    assert ClusterStore(served, name="test-cluster-store").get_run("p") is None  # today's


def test_a_caller_that_says_no_protocol_is_refused_by_a_newer_head(served: Any) -> None:
    """A process of before session 27 checks no protocol and says none: it calls the head's
    methods as they were (no last argument). Today's head refuses each such call by name,
    saying what to upgrade, before it reads or writes anything; a caller of today goes on."""
    import ray

    from subagents.cluster.membership import NodeInfo
    from subagents.cluster.store_service import StoreCall

    said = (
        f"this cluster's head runs subagents protocol {PROTOCOL}; the process calling it says"
        " no protocol version: it runs a subagents of session 27 or older: a head and the"
        " processes using it must run the same subagents. Upgrade the calling process (the"
        " driver, a node's subagents, or the CLI) to the head's version"
    )
    old_calls = [  # what such a process sent (session 26's ``ClusterStore``, node host)
        served.info.remote(),
        served.write.remote([StoreCall("save_run", (run("old1"),))]),
        served.call.remote(StoreCall("get_run", ("old1",))),
        served.read_within.remote([], StoreCall("get_run", ("old1",))),
        served.write_then.remote([], StoreCall("take_commands", (None,))),
        served.list_runs_sparing.remote(StoreCall("list_runs")),
        served.register.remote(NodeInfo(node="old-node", host="h"), None),
    ]
    for ref in old_calls:
        with pytest.raises(StoreError) as refused:
            ray.get(ref, timeout=WAIT_S)
        error = refused.value.cause  # type: ignore[attr-defined]  # (as the head raised it)
        assert str(error).startswith(said), error
    store = ClusterStore(served, name="test-cluster-store")  # today's: goes on
    assert store.get_run("old1") is None  # (nothing of the old write was kept)
    store.save_run(run("new1"))
    assert store.get_run("new1") == run("new1")
