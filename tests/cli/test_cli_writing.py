"""What a model is writing, shown live: ``log -f`` in another process (the store's preview),
the live tree of ``run`` (``text_delta`` events) and ``attach``'s tree (the preview again).

The run across processes is a detached host playing a scripted turn streamed in two pieces
over ten minutes: the first piece is out at once, and stays the run's preview for as long as
the test needs it (it is stopped after). The views' parts are tested on known inputs.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import DEADLINE_S, Cli, finish
from rich.console import Console

from subagents.cli.live import LiveTree
from subagents.cli.views import render_tree
from subagents.cli.writing import VOID, WritingFollower
from subagents.messages import Event, EventKind, Preview, RunStatus, TreeNode, Usage

WRITER = """---
name: writer
description: Writes slowly.
script:
  - text: "first half|second half"
    stream: 2
    delay: 600
---
You write.
"""


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    cli = Cli(tmp_path)
    (cli.agents / "writer.md").write_text(WRITER, encoding="utf-8")
    yield cli


def _json_lines_until(
    proc: subprocess.Popen[str], wanted: str, timeout: float = DEADLINE_S
) -> list[dict[str, Any]]:
    """JSON lines ``proc`` prints, up to the first of kind ``wanted`` (read from the pipe's
    descriptor: a buffered readline would hold lines that ``select`` no longer sees)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    seen: list[dict[str, Any]] = []
    pending = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            entry = msgspec.json.decode(line)
            seen.append(entry)
            if entry["kind"] == wanted:
                return seen
    raise AssertionError(f"no {wanted!r} entry; got {seen}")


def test_log_follow_shows_what_the_model_is_writing(cli: Cli) -> None:
    started = cli("run", "--detach", "writer", "write", "--agents", str(cli.agents), "--json")
    assert started.returncode == 0, started.stderr
    run_id = msgspec.json.decode(started.stdout)["run_id"]
    follow = cli.start("log", run_id, "--follow", "--json")
    try:
        entries = _json_lines_until(follow, "writing")
    finally:
        assert cli("stop", run_id, "--wait", "60").returncode == 0
    code, _out, err = finish(follow)
    assert code == 0, err
    writing = entries[-1]
    assert writing["text"] == "first half|" and writing["run_id"] == run_id
    assert writing["data"]["turn"] == 1
    # nothing of it is in the run's history
    kinds = [e["kind"] for e in cli.json("log", run_id)["entries"]]
    assert "writing" not in kinds and "text_delta" not in kinds


def test_the_writing_follower_shows_each_piece_once_and_says_when_it_is_void() -> None:
    follower = WritingFollower()

    def seen(**fields: Any) -> list[tuple[str, str]]:
        preview = Preview(run_id="r1", turn=fields.pop("turn", 1), ts=1.0, **fields)
        return [(e.kind, e.text) for e in follower.seen(preview)]

    assert seen(text="Hello", chars=5, seq=1) == [("writing", "Hello")]
    assert seen(text="Hello", chars=5, seq=1) == []  # polled again: nothing new
    assert seen(text="Hello, wor", chars=10, seq=2) == [("writing", ", wor")]
    assert seen(text="", chars=0, seq=3, voided=1) == [("writing", VOID)]
    assert seen(text="Hi", chars=2, seq=4, voided=1) == [("writing", "Hi")]
    assert seen(text="…er", chars=5000, seq=5, voided=1) == [("writing", "……er")]  # cut
    assert seen(turn=2, text="Next", chars=4, seq=1) == [("writing", "Next")]


def _event(kind: EventKind, **data: Any) -> Event:
    return Event(kind=kind, run_id="r1", agent="writer", root_run_id="r1", data=data)


def _text(text: str) -> dict[str, str]:
    return {"kind": "text", "text": text}


def _drawn(tree: LiveTree) -> str:
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(tree.render())
    return console.export_text()


def test_the_live_tree_shows_the_end_of_what_is_written_until_the_step() -> None:
    tree = LiveTree()
    tree.on_event(_event(EventKind.STARTED))
    tree.on_event(_event(EventKind.TEXT_DELTA, turn=1, seq=1, parts=[_text("Looking at")]))
    read = {"kind": "tool_input", "tool": "Read", "text": '{"p": 1}'}
    tree.on_event(_event(EventKind.TEXT_DELTA, turn=1, seq=2, parts=[read]))
    assert '✎ Looking at{"p": 1}' in _drawn(tree)
    tree.on_event(_event(EventKind.TEXT_DELTA, turn=1, seq=3, void=True))
    assert "✎" not in _drawn(tree)
    tree.on_event(_event(EventKind.TEXT_DELTA, turn=1, seq=4, parts=[_text("Again")]))
    assert "✎ Again" in _drawn(tree)
    tree.on_event(_event(EventKind.STEP, step=1, input_tokens=3, output_tokens=2))
    assert "✎" not in _drawn(tree)
    assert tree.journal == ["  0.00s  writer r1  started"]  # deltas are not journaled


def test_attach_s_tree_shows_what_live_runs_are_writing() -> None:
    node = TreeNode(run_id="r1", agent="writer", status=RunStatus.RUNNING, depth=0, steps=0,
                    usage=Usage(), subtree_usage=Usage())  # fmt: skip
    shown = render_tree(node, {"r1": "r1"}, writing={"r1": "line one\nline\x1b[31m two"})
    label = str(shown.label)
    assert "✎ line one line\\x1b[31m two" in label  # one line, control characters escaped
    ended = msgspec.structs.replace(node, status=RunStatus.COMPLETED)
    assert "✎" not in str(render_tree(ended, {"r1": "r1"}, writing={"r1": "x"}).label)
