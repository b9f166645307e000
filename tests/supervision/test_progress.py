"""Progress, decided without threads: what a ``Streamed`` report comes to (a published,
unstored ``text_delta`` and the run's preview), when the preview goes, and who may ask
where a run is."""

from __future__ import annotations

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    EventKind,
    RunRecord,
    RunStatus,
    Streamed,
    StreamedPart,
)
from subagents.store.writes import AppendEvent, DropPreview, SavePreview
from subagents.supervision.effects import Publish
from subagents.supervision.progress import Progress
from subagents.supervision.runs import RunState, RunTable


def _table(*runs: tuple[str, str, RunStatus]) -> tuple[RunTable, dict[str, RunState]]:
    table = RunTable()
    states = {}
    for run_id, root, status in runs:
        record = RunRecord(run_id=run_id, agent="a", task="t", root_run_id=root, status=status,
                           parent_run_id=None if run_id == root else root)  # fmt: skip
        state = RunState(record=record, spec=AgentSpec(name="a", description="d"),
                         request_id=None, attempt=1)  # fmt: skip
        table.add(state)
        states[run_id] = state
    return table, states


def _text(seq: int, text: str, **fields: object) -> Streamed:
    return Streamed(run_id="r1", turn=1, seq=seq, attempt=1,
                    parts=(StreamedPart(kind="text", text=text),), **fields)  # type: ignore[arg-type]  # fmt: skip


def test_a_report_is_published_not_stored_and_becomes_the_preview() -> None:
    table, states = _table(("r1", "r1", RunStatus.RUNNING))
    progress = Progress(table, lambda: 5.0)
    decision = progress.streamed(_text(1, "Hello"))
    assert not any(isinstance(w, AppendEvent) for w in decision.writes)
    (save,) = decision.writes
    assert isinstance(save, SavePreview) and save.preview.text == "Hello"
    (publish,) = decision.effects
    assert isinstance(publish, Publish) and publish.event.kind is EventKind.TEXT_DELTA
    assert publish.event.data == {"turn": 1, "seq": 1, "parts": [{"kind": "text", "text": "Hello"}]}
    tool = Streamed(run_id="r1", turn=1, seq=2, attempt=1, skipped=3,
                    parts=(StreamedPart(kind="tool_input", text='{"a', tool="Read"),))  # fmt: skip
    after = progress.streamed(tool).writes[0]
    assert isinstance(after, SavePreview)
    assert after.preview.text == 'Hello … \n[tool Read] {"a'
    assert after.preview.chars == 5 + 3 + 3 and after.preview.tool == "Read"
    assert progress.stepped(states["r1"]) == [DropPreview("r1")]
    assert progress.stepped(states["r1"]) == []  # dropped once


def test_a_void_report_empties_the_preview_and_counts_it() -> None:
    table, _ = _table(("r1", "r1", RunStatus.RUNNING))
    progress = Progress(table, lambda: 5.0)
    progress.streamed(_text(1, "half of it"))
    decision = progress.streamed(Streamed(run_id="r1", turn=1, seq=2, attempt=1, void=True))
    save = decision.writes[0]
    assert isinstance(save, SavePreview)
    assert (save.preview.text, save.preview.chars, save.preview.voided) == ("", 0, 1)
    publish = decision.effects[0]
    assert isinstance(publish, Publish) and publish.event.data == {
        "turn": 1,
        "seq": 2,
        "void": True,
    }


def test_reports_of_an_ended_run_or_an_earlier_start_publish_nothing() -> None:
    table, states = _table(("r1", "r1", RunStatus.RUNNING))
    progress = Progress(table, lambda: 5.0)
    progress.streamed(_text(1, "x"))
    stale = Streamed(run_id="r1", turn=1, seq=9, attempt=7, void=True)
    assert progress.streamed(stale).writes == [] and progress.streamed(stale).effects == []
    states["r1"].record = RunRecord(run_id="r1", agent="a", task="t", root_run_id="r1",
                                    status=RunStatus.CANCELLED)  # fmt: skip
    ended = progress.streamed(_text(2, "y", void=True))
    assert ended.writes == [DropPreview("r1")] and ended.effects == []


def test_reports_of_a_start_a_retry_ended_publish_nothing_until_it_starts_again() -> None:
    table, states = _table(("r1", "r1", RunStatus.RUNNING))
    progress = Progress(table, lambda: 5.0)
    assert progress.streamed(_text(1, "x")).effects != []
    table.update(states["r1"], retries=1)  # a retry decided: this start is over
    retried = progress.streamed(_text(2, "y"))
    assert retried.writes == [] and retried.effects == []
    states["r1"].attempt += 1  # started again (``Lifecycle.start``): its reports count
    again = Streamed(run_id="r1", turn=1, seq=1, attempt=2,
                     parts=(StreamedPart(kind="text", text="z"),))  # fmt: skip
    assert progress.streamed(again).effects != []


def test_who_may_ask_where_a_run_is() -> None:
    table, _ = _table(
        ("r1", "r1", RunStatus.RUNNING),
        ("c1", "r1", RunStatus.WAITING),
        ("r2", "r2", RunStatus.RUNNING),
    )
    progress = Progress(table, lambda: 5.0)
    assert progress.status("c1", None) is not None  # the outside: any run
    child = progress.status("c1", "r1")  # the root about its child
    assert child is not None and child.status is RunStatus.WAITING
    assert progress.status("r1", "c1") is not None  # a child about its root
    with pytest.raises(ValueError, match="only ask about runs of its own tree"):
        progress.status("r2", "c1")
    assert progress.status("gone", "c1") is None  # not held: the store is asked
