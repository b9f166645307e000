"""StoreService, without Ray: what a remote client may call, batches all or nothing, reads
over a batch's uncommitted writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.cluster.store_service import StoreCall, StoreService
from subagents.messages import Lease
from subagents.store.base import Fenced, StoreError
from subagents.store.sqlite import SQLiteStore

from .records import event, run


@pytest.fixture
def service(tmp_path: Path) -> Iterator[StoreService]:
    store = SQLiteStore(tmp_path / "runs.sqlite3")
    yield StoreService(store)
    store.close()


def test_info_names_the_file_and_the_process(service: StoreService, tmp_path: Path) -> None:
    info = service.info()
    assert Path(info.path) == service.store.path  # type: ignore[attr-defined]
    assert info.pid > 0 and info.host


def test_writes_of_one_call_commit_together(service: StoreService) -> None:
    service.write([StoreCall("save_run", (run("r1"),)), StoreCall("append_event", (event("r1"),))])
    assert service.call(StoreCall("get_run", ("r1",))) == run("r1")
    assert service.call(StoreCall("events", ("r1",))) == [event("r1")]


def test_a_failing_write_rolls_back_the_whole_call(service: StoreService) -> None:
    with pytest.raises(AttributeError):  # the store's own error, as it raised it
        service.write(
            [
                StoreCall("save_run", (run("r1"),)),
                StoreCall("append_event", ("not an event",)),
            ]
        )
    assert service.call(StoreCall("get_run", ("r1",))) is None


def test_only_protocol_methods_of_the_right_kind_are_callable(service: StoreService) -> None:
    for name in ("sweep", "close", "_connection", "batch"):
        with pytest.raises(StoreError, match=f"store call '{name}': not something a client"):
            service.call(StoreCall(name))
    # a read is not a write, and an unknown name in a batch refuses the whole batch
    with pytest.raises(StoreError, match="'get_run'"):
        service.write([StoreCall("save_run", (run("r1"),)), StoreCall("get_run", ("r1",))])
    assert service.call(StoreCall("get_run", ("r1",))) is None
    with pytest.raises(StoreError, match="'save_run'"):
        service.call(StoreCall("save_run", (run("r1"),)))


def test_read_within_sees_the_held_writes_and_commits_none(service: StoreService) -> None:
    held = [StoreCall("save_run", (run("r1"),)), StoreCall("append_event", (event("r1"),))]
    assert service.read_within(held, StoreCall("get_run", ("r1",))) == run("r1")
    assert service.read_within(held, StoreCall("events", ("r1",))) == [event("r1")]
    assert service.call(StoreCall("get_run", ("r1",))) is None
    assert service.call(StoreCall("events", ("r1",))) == []
    with pytest.raises(StoreError, match="'take_commands'"):  # it writes: not a read
        service.read_within(held, StoreCall("take_commands"))


def test_a_claim_of_commands_commits_with_the_writes_held_before_it(
    service: StoreService,
) -> None:
    posted = service.call(StoreCall("post_command", ("stop", "r1")))
    held = [StoreCall("save_run", (run("r1"),))]
    claimed = service.write_then(held, StoreCall("take_commands", (None,)))
    assert [c.command_id for c in claimed] == [posted]
    assert service.call(StoreCall("get_run", ("r1",))) == run("r1")
    with pytest.raises(StoreError, match="'get_run'"):  # only an answering write
        service.write_then(held, StoreCall("get_run", ("r1",)))


def test_answering_writes_are_calls(service: StoreService) -> None:
    first = service.call(StoreCall("post_command", ("stop", "r1")))
    commands = service.call(StoreCall("take_commands", (None,)))
    assert [c.command_id for c in commands] == [first]


def test_a_batch_fenced_by_a_lease_taken_over_is_refused_whole_on_the_head(
    service: StoreService,
) -> None:
    """What a runtime's batch is on the wire: its fence first, checked on the head inside
    the transaction that applies the writes (``store.fencing``)."""
    lease = Lease(owner="driver:1:a", host="driver", pid=1, expires_at=1e12)
    epoch = service.call(StoreCall("acquire_lease", (lease,)))
    fence = StoreCall("check_fence", ("driver:1:a", epoch))
    service.write([fence, StoreCall("save_run", (run("r1"),))])
    service.write([StoreCall("release_lease", ("driver:1:a",))])  # a resume took its runs
    with pytest.raises(Fenced, match="the lease of driver:1:a"):
        service.write([fence, StoreCall("save_run", (run("r2"),))])
    assert service.call(StoreCall("get_run", ("r2",))) is None
    assert service.call(StoreCall("get_run", ("r1",))) == run("r1")


def test_a_caller_of_another_protocol_or_of_none_is_refused_saying_what_to_upgrade() -> None:
    """``caller_protocol``: what the head checks of every call (its last argument)."""
    from subagents.cluster.store_service import PROTOCOL, caller_protocol

    caller_protocol(PROTOCOL)  # today's: no error
    for theirs, said in [
        (None, "says no protocol version: it runs a subagents of session 27 or older"),
        (PROTOCOL - 1, f"runs protocol {PROTOCOL - 1}"),
        ("x", "runs protocol 'x'"),
    ]:
        with pytest.raises(StoreError) as refused:
            caller_protocol(theirs)
        assert str(refused.value) == (
            f"this cluster's head runs subagents protocol {PROTOCOL}; the process calling it"
            f" {said}: a head and the processes using it must run the same subagents. Upgrade"
            " the calling process (the driver, a node's subagents, or the CLI) to the head's"
            " version; nothing was read or written"
        )
