"""Two runtimes on one store: each keeps to its own runs (a dead process's runs are taken up:
see test_crash_recovery)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from subagents import AgentSpec, Runtime, ScriptedModel, SQLiteStore
from subagents.messages import RunStatus
from subagents.store.ownership import new_owner, owner_alive, release_owner

SLOW = ScriptedModel({"slow": [{"text": "done {task}", "delay": 30}]})
AGENTS = [AgentSpec(name="slow", description="takes its time")]


def test_owner_ids_are_alive_until_released() -> None:
    owner = new_owner()
    assert owner_alive(owner)
    release_owner(owner)
    assert not owner_alive(owner)
    assert not owner_alive(None)
    assert not owner_alive("garbage")


def test_a_second_runtime_leaves_a_live_runtimes_runs_and_commands_alone(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = Runtime(AGENTS, model=SLOW, store=SQLiteStore(db), command_poll_s=0.05)
    started = threading.Event()
    first.subscribe(lambda e: started.set() if e.kind == "started" else None)
    try:
        handle = first.spawn("slow", "a")
        assert started.wait(5)
        second_store = SQLiteStore(db)
        with Runtime(AGENTS, model=SLOW, store=second_store, command_poll_s=0.05) as second:
            assert second.restore_report.resumed == []
            assert handle.run_id in second.restore_report.elsewhere
            # a stop posted for the first runtime's run is not taken by the second one
            second_store.post_command("stop", handle.run_id)
            outcome = handle.result(timeout=10)
            assert outcome.status is RunStatus.CANCELLED
            assert outcome.error == "stopped from another process"
        second_store.close()
    finally:
        first.close()


def test_stop_and_send_for_a_run_hosted_by_another_runtime_are_passed_on(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    slow = ScriptedModel(
        {
            "slow": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 30}}]},
                {"text": "got {mail_content}", "delay": 30},
            ]
        }
    )
    agents = [AgentSpec(name="slow", description="waits")]
    waiting = threading.Event()

    def on_event(event: Any) -> None:
        if event.kind == "waiting":
            waiting.set()

    with Runtime(agents, model=slow, store=SQLiteStore(db), command_poll_s=0.05) as host:
        host.subscribe(on_event)
        handle = host.spawn("slow", "s")
        assert waiting.wait(10)
        with Runtime(agents, model=slow, store=SQLiteStore(db), command_poll_s=0.05) as other:
            mail_id = other.send(handle.run_id, "hello from elsewhere")
            assert mail_id.startswith("command-")
            assert other.stop(handle.run_id) == (handle.run_id,)
        outcome = handle.result(timeout=10)
    assert outcome.status is RunStatus.CANCELLED
    assert outcome.error == "stopped from another process"
    mail = SQLiteStore(db).mail_for(handle.run_id)
    assert [m.content for m in mail] == ["hello from elsewhere"]
