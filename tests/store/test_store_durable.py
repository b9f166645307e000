"""The durable stores beyond the protocol, SQLite's file and PostgreSQL alike (the
``reopen`` fixture: each test runs with both): batches are atomic and invisible until they
commit, threads never see half of one, a closed store says so, bad records are refused
by name. A difference between the two is a bug, or documented in docs/store.md."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from storekit import Durable, checkpoint, event, mail, outcome, run

from subagents.messages import MailState, RunStatus
from subagents.store.base import StoreError

Reopen = Callable[[], Durable]


def test_everything_survives_close_and_reopen(reopen: Reopen) -> None:
    store = reopen()
    with store.batch():
        store.save_run(run("r1", created_at=1.0, status=RunStatus.RUNNING))
        store.append_event(event("r1"))
        store.save_checkpoint(checkpoint("r1", 3))
        store.save_mail(mail("m1", "r1", "r2"))
        store.save_outcome(outcome("r2"))
    store.set_mail_state("m1", MailState.DELIVERED)
    command_id = store.post_command("send", "r1", "more\x00 with a NUL")
    store.close()
    store = reopen()
    assert store.found_version == store.schema_version
    assert store.list_runs() == [run("r1", created_at=1.0, status=RunStatus.RUNNING)]
    assert store.events("r1") == [event("r1")]
    assert store.load_checkpoint("r1") == checkpoint("r1", 3)
    assert [m.state for m in store.mail_for("r2")] == [MailState.DELIVERED]
    assert store.undelivered_outcomes() == [outcome("r2")]
    taken = store.take_commands()
    assert [(c.command_id, c.content) for c in taken] == [(command_id, "more\x00 with a NUL")]
    assert store.meta() == {"application": "subagents", "schema_version": str(store.schema_version)}


def test_exception_inside_batch_rolls_back_everything(reopen: Reopen) -> None:
    store = reopen()
    store.save_run(run("kept"))
    with pytest.raises(RuntimeError, match="boom"), store.batch():
        store.save_run(run("r1"))
        store.append_event(event("kept"))
        with store.batch():
            store.save_checkpoint(checkpoint("kept", 1))
        store.save_outcome(outcome("kept"))
        store.post_command("stop", "kept")
        raise RuntimeError("boom")
    for s in (store, reopen()):  # this connection and a fresh one agree
        assert s.list_runs() == [run("kept")]
        assert s.events("kept") == []
        assert s.load_checkpoint("kept") is None
        assert s.undelivered_outcomes() == []
    assert store.take_commands() == []
    # and the store goes on working after the rollback
    store.save_run(run("after"))
    assert [r.run_id for r in reopen().list_runs()] == ["after", "kept"]


def test_nested_batch_failure_undoes_only_its_own_writes(durable_store: Durable) -> None:
    with durable_store.batch():
        durable_store.save_run(run("outer1"))
        with pytest.raises(KeyError), durable_store.batch():
            durable_store.save_run(run("inner"))
            raise KeyError("inner fails")
        durable_store.save_run(run("outer2"))
    assert [r.run_id for r in durable_store.list_runs()] == ["outer1", "outer2"]


def test_batch_is_invisible_to_other_connections_until_commit(reopen: Reopen) -> None:
    writer = reopen()
    reader = reopen()
    with writer.batch():
        writer.save_run(run("r1"))
        writer.append_event(event("r1"))
        assert reader.get_run("r1") is None
        assert reader.events("r1") == []
        assert writer.get_run("r1") == run("r1")
    assert reader.get_run("r1") == run("r1")
    assert reader.events("r1") == [event("r1")]


def test_write_outside_a_batch_commits_at_once(reopen: Reopen) -> None:
    writer = reopen()
    reader = reopen()
    writer.save_run(run("r1"))
    assert reader.get_run("r1") == run("r1")
    writer.save_outcome(outcome("r1"))
    assert reader.undelivered_outcomes() == [outcome("r1")]


def test_reader_threads_never_see_half_a_batch(durable_store: Durable) -> None:
    batches, per_batch = 40, 10
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for b in range(batches):
                with durable_store.batch():
                    for i in range(per_batch):
                        durable_store.save_run(run(f"r{b:03d}-{i:02d}", created_at=float(b)))
                        durable_store.append_event(event(f"r{b:03d}-{i:02d}"))
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def read() -> None:
        try:
            while not done.is_set():
                seen.append(len(durable_store.list_runs()))
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    writer = threading.Thread(target=write)
    writer.start()
    writer.join(timeout=30)
    for t in readers:
        t.join(timeout=30)
    assert not writer.is_alive() and not any(t.is_alive() for t in readers)
    assert errors == []
    assert seen, "the readers read nothing"
    assert all(n % per_batch == 0 for n in seen), sorted(set(seen))
    assert len(durable_store.list_runs()) == batches * per_batch


def test_closed_store_raises_store_error(reopen: Reopen) -> None:
    store = reopen()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_run("r1")
    with pytest.raises(StoreError, match="closed"):
        store.save_run(run("r1"))


def test_list_runs_accepts_status_strings_and_rejects_unknown_ones(
    durable_store: Durable,
) -> None:
    durable_store.save_run(run("r1", status=RunStatus.WAITING))
    assert [r.run_id for r in durable_store.list_runs(statuses=["waiting"])] == ["r1"]  # type: ignore[list-item]
    with pytest.raises(ValueError, match="'sleeping'"):
        durable_store.list_runs(statuses=["sleeping"])  # type: ignore[list-item]


def test_records_that_could_not_be_read_back_are_refused_by_name(
    durable_store: Durable,
) -> None:
    with durable_store.batch():
        durable_store.save_run(run("ok"))
        with pytest.raises(ValueError, match=r"cannot store run r1: .*NaN and infinite"):
            durable_store.save_run(run("r1", deadline_s=float("inf")))
        with pytest.raises(
            ValueError, match=r"cannot store an event of run r1 \(kind .*\): .*object"
        ):
            durable_store.append_event(event("r1", unencodable=object()))
        durable_store.append_event(event("ok"))
    # the refused writes left nothing behind and did not spoil the batch
    assert [r.run_id for r in durable_store.list_runs()] == ["ok"]
    assert durable_store.events("ok") == [event("ok")]
    assert durable_store.events("r1") == []
