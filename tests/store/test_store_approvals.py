"""Durable approvals in the store, MemoryStore and SQLiteStore alike: an ask kept once, the
pending ones listed (not those of ended runs), an answer given once and posted for the
hosting runtime as an ``approval`` command, refusals naming why, an answered ask asked again
(a restarted run) posted again."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from pathlib import Path

import msgspec
import pytest
from storekit import run

from subagents.messages import ApprovalAnswered, ApprovalRecord, RunStatus
from subagents.store.approvals import ApprovalRefused
from subagents.store.base import RunStore, StoreError
from subagents.store.sqlite import SQLiteStore


def ask(approval_id: str, run_id: str = "r1", root: str = "r1", at: float = 1.0) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=approval_id,
        run_id=run_id,
        root_run_id=root,
        agent="worker",
        tool="Bash",
        input={"command": "make"},
        reason="Bash needs approval in default mode",
        requester="external",
        tool_use_id="tu1",
        asked_at=at,
    )


def test_an_ask_is_kept_once_and_listed_while_its_run_is_live(store: RunStore) -> None:
    store.save_run(run("r1", status=RunStatus.WAITING))
    store.save_run(run("r2", status=RunStatus.WAITING))
    with store.batch():
        store.save_approval(ask("ap2", "r2", "r2", at=2.0))
        store.save_approval(ask("ap1"))
    store.save_approval(msgspec.structs.replace(ask("ap1"), asked_at=9.0))  # asked again
    assert store.get_approval("ap1") == ask("ap1")  # the first ask stands
    assert store.get_approval("nope") is None
    assert [a.approval_id for a in store.list_approvals()] == ["ap1", "ap2"]
    assert [a.approval_id for a in store.list_approvals(root_run_id="r2")] == ["ap2"]
    assert [a.approval_id for a in store.list_approvals(run_id="r1")] == ["ap1"]
    assert store.take_commands() == []  # nothing answered: nothing posted
    store.save_run(run("r2", status=RunStatus.CANCELLED))
    assert [a.approval_id for a in store.list_approvals()] == ["ap1"]  # r2 ended
    assert [a.approval_id for a in store.list_approvals(pending=False)] == ["ap1", "ap2"]


def test_an_answer_is_given_once_and_posted_for_the_host(store: RunStore) -> None:
    store.save_run(run("r1", status=RunStatus.WAITING))
    store.save_approval(ask("ap1"))
    done = store.answer_approval("ap1", True, "fine", "Bash(make:*)")
    assert (done.status, done.answer, done.remember) == ("allowed", "fine", "Bash(make:*)")
    assert done.answered_at is not None and store.get_approval("ap1") == done
    assert store.list_approvals() == []
    (posted,) = store.take_commands(["r1"])
    assert (posted.kind, posted.run_id) == ("approval", "r1")
    assert posted.content is not None
    told = msgspec.json.decode(posted.content, type=ApprovalAnswered)
    assert told == ApprovalAnswered(approval_id="ap1", allow=True, answer="fine")
    with pytest.raises(ApprovalRefused, match="approval ap1 was already answered: allowed") as why:
        store.answer_approval("ap1", False)
    assert re.search(r"allowed at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$", str(why.value)), why.value
    with pytest.raises(ApprovalRefused, match="no approval 'ap9' in the store"):
        store.answer_approval("ap9", True)
    # asked again (the run restarted after a crash): the answer is posted again
    store.save_approval(ask("ap1"))
    (again,) = store.take_commands(["r1"])
    assert again.kind == "approval" and again.content == posted.content
    assert store.get_approval("ap1") == done


def test_a_deny_keeps_no_rule_and_an_ended_run_refuses_answers(store: RunStore) -> None:
    store.save_run(run("r1", status=RunStatus.WAITING))
    store.save_approval(ask("ap1"))
    denied = store.answer_approval("ap1", False, "no", "Bash(make:*)")
    assert (denied.status, denied.remember) == ("denied", None)
    store.save_approval(ask("ap2"))
    store.save_run(run("r1", status=RunStatus.TIMED_OUT))
    with pytest.raises(ApprovalRefused, match=r"its run r1 \(worker\) has ended \(timed_out\)"):
        store.answer_approval("ap2", True)
    assert store.get_approval("ap2") == ask("ap2")  # refused: nothing written


def test_an_ask_of_a_retried_runs_earlier_attempt_is_not_listed_on_any_store(
    store: RunStore,
) -> None:
    store.save_run(run("r1", status=RunStatus.WAITING))
    store.save_approval(msgspec.structs.replace(ask("ap1"), retries=0))
    assert [a.approval_id for a in store.list_approvals()] == ["ap1"]
    store.save_run(run("r1", status=RunStatus.RUNNING, retries=1))  # retried from scratch
    assert store.list_approvals() == []
    assert [a.approval_id for a in store.list_approvals(pending=False)] == ["ap1"]
    with pytest.raises(ApprovalRefused, match="retried from scratch"):
        store.answer_approval("ap1", True)


def test_an_answer_to_an_ask_whose_runs_row_is_damaged_names_that_row(tmp_path: Path) -> None:
    # the error named the runs row by the approval's id ('ap1'): no such run to look at
    path = tmp_path / "runs.db"
    with SQLiteStore(path) as store:
        store.save_run(run("r1", status=RunStatus.WAITING))
        store.save_approval(ask("ap1"))
        with contextlib.closing(sqlite3.connect(path)) as conn, conn:
            conn.execute("UPDATE runs SET record = '{' WHERE run_id = 'r1'")
        with pytest.raises(StoreError, match=r"cannot read runs row 'r1': "):
            store.answer_approval("ap1", True)
        assert store.get_approval("ap1") == ask("ap1")  # nothing answered
        assert store.take_commands(["r1"]) == []
