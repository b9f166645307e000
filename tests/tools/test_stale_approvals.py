"""An approval left pending by an older subagents, whose approval ids did not include the turn
(before session 21): a newer runtime resuming the run asks for the same call again under a
new id, and nothing waits for the old one. It is not listed as waiting (`subagents
approvals`, ``rt.approvals()``, `ps`), `--all` shows it `superseded`, and an answer to it is
refused naming the ask that replaced it. Before, it was listed as pending for ever and
`subagents approve` on it said it was allowed while the call went on waiting.

Real actors, a real SQLite file, the CLI in processes of its own; the old row is written as
the older code wrote it: the same record, under the id its ``approval_id_for`` made."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import msgspec

from subagents.messages import RunStatus, approval_id_for
from subagents.models.scripted import ScriptedModel

from .conftest import WAIT
from .test_store_approvals import Asks, appender, runtime, store_beside


def _old_id(run_id: str, tool_use_id: str, retries: int) -> str:
    """``approval_id_for`` as it was before the turn was part of the id (feebafa^)."""
    return "ap" + hashlib.sha256(f"{run_id}\0{retries}\0{tool_use_id}".encode()).hexdigest()[:14]


def _cli(state: Path, *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", *words, "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


def test_an_approval_an_older_version_left_pending_is_not_listed_and_not_answerable(
    tmp_path: Path,
) -> None:
    model = ScriptedModel({"worker": [appender("one"), {"text": "done"}]})
    state = store_beside(tmp_path)
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        new = rt.store.get_approval(asks.wait(1))
        assert new is not None
        stale_id = _old_id(new.run_id, new.tool_use_id, new.retries or 0)
        assert stale_id != new.approval_id
        rt.store.save_approval(  # as the older runtime kept it before the run was resumed
            msgspec.structs.replace(new, approval_id=stale_id, asked_at=new.asked_at - 60)
        )

        listed = _cli(state, "approvals", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [a["id"] for a in json.loads(listed.stdout)] == [new.approval_id]
        assert [a.approval_id for a in rt.approvals()] == [new.approval_id]
        every = _cli(state, "approvals", "--all", "--json")
        shown = {a["id"]: a["status"] for a in json.loads(every.stdout)}
        assert shown == {stale_id: "superseded", new.approval_id: "pending"}

        refused = _cli(state, "approve", stale_id)
        assert refused.returncode != 0
        assert f"asked for the same call again under {new.approval_id}" in refused.stderr
        assert "answer that one" in refused.stderr
        stale = rt.store.get_approval(stale_id)
        assert stale is not None and stale.pending  # nothing was written

        allowed = _cli(state, "approve", new.approval_id)
        assert allowed.returncode == 0, allowed.stderr
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
        refused = _cli(state, "deny", stale_id)
        assert refused.returncode != 0
        assert "that one was answered: allowed" in refused.stderr
    assert (tmp_path / "count.txt").read_text() == "one\n"


def test_an_ask_of_this_version_is_never_taken_as_superseded(tmp_path: Path) -> None:
    """Only an id an older subagents made (``approval_id_for`` without the turn) can be
    superseded. An ask of this version under its own id is the one its call waits for, even
    when the same run has another ask of the same call id that reads as later: a model that
    repeats a tool_use id in a later turn (tests/tools/test_repeated_tool_ids.py) answered
    there on a host whose clock was ahead (a run resumed on another machine). Before, that
    hid the waiting ask and refused its answer: the run waited to its deadline."""
    model = ScriptedModel({"worker": [appender("one"), {"text": "done"}]})
    with runtime(tmp_path, model) as rt:
        asks = Asks(rt)
        handle = rt.spawn("worker", "count")
        new = rt.store.get_approval(asks.wait(1))
        assert new is not None
        other_turn = approval_id_for(new.run_id, new.tool_use_id, new.retries or 0, step=7)
        assert other_turn != new.approval_id
        rt.store.save_approval(  # the same call id's ask of another turn, answered
            msgspec.structs.replace(
                new,
                approval_id=other_turn,
                asked_at=new.asked_at + 60,
                status="allowed",
                answered_at=new.asked_at + 61,
            )
        )
        assert [a.approval_id for a in rt.approvals()] == [new.approval_id]
        rt.answer(new.approval_id, True)
        assert handle.result(timeout=WAIT).status is RunStatus.COMPLETED
    assert (tmp_path / "count.txt").read_text() == "one\n"
