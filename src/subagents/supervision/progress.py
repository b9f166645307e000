"""Live progress: what a run's model is writing, and where a run is, decided in memory.

Why its own part: streaming is a view, not history. A ``Streamed`` report becomes a
``text_delta`` event that is published (the live tree, the web console, telemetry) but never
appended to the run's events, and the run's ``Preview`` (the end of what it has written in
the step under way) that the store keeps, one row per run, for viewers in other processes
(``subagents log -f``, ``attach``), dropped when the step is recorded: the step's own record
(its checkpoint, its ``step`` event) says what was written, so a run that streamed keeps the
same history as one that did not, and a replay never sees a delta. A report of an attempt
that failed (``void``) empties the preview, so nothing of it is left to mislead.

``status`` answers where a run is (``RunProgress``) from what the supervisor holds: its
record, its unread mail, the last tool it called, its preview. Who may ask: the outside
about any run; a run only about runs of its own tree (as mail, ``mailroom``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subagents.messages import (
    PREVIEW_CHARS,
    EventKind,
    Preview,
    RunProgress,
    RunRecord,
    Streamed,
)
from subagents.store.writes import DropPreview, SavePreview, Write
from subagents.supervision.effects import Decision, Publish, event_of
from subagents.supervision.runs import RunState, RunTable

WRITING_CHARS = 300
"""How much of the end of a run's preview a ``RunProgress`` shows."""


class Progress:
    """The live progress of the runs of ``runs`` (their ``RunState.preview`` and
    ``RunState.last_tool``)."""

    def __init__(self, runs: RunTable, now: Callable[[], float]) -> None:
        self.runs = runs
        self.now = now

    def streamed(self, msg: Streamed) -> Decision:
        """A run's model wrote something: its preview replaced, a ``text_delta`` published.
        From a run that ended, only its preview dropped; from an earlier start, or one a
        restart or retry ended, nothing."""
        state = self.runs.get(msg.run_id)
        if state is None or msg.attempt not in (0, state.attempt) or state.between_starts():
            return Decision(None, [], [])
        if state.record.status.terminal:
            return Decision(None, self.stepped(state), [])
        preview = next_preview(state.preview, msg, self.now())
        state.preview = preview
        data: dict[str, Any] = {"turn": msg.turn, "seq": msg.seq}
        if msg.void:
            data["void"] = True
        else:
            data["parts"] = [
                {"kind": p.kind, "text": p.text, **({"tool": p.tool} if p.tool else {})}
                for p in msg.parts
            ]
            if msg.skipped:
                data["skipped"] = msg.skipped
        event = event_of(EventKind.TEXT_DELTA, state.record, preview.ts, data)
        return Decision(None, [SavePreview(preview)], [Publish(event)])

    @staticmethod
    def stepped(state: RunState | None) -> list[Write]:
        """The run's step was recorded: its preview, if it has one, is dropped."""
        return drop_preview(state)

    def status(self, run_id: str, asker: str | None) -> RunProgress | None:
        """Where ``run_id`` is, from memory (None: not held here; ``ValueError``: ``asker``
        may not ask about it)."""
        state = self.runs.get(run_id)
        if state is None:
            return None
        self.check_asker(asker, state.record)
        writing = state.preview.text[-WRITING_CHARS:] if state.preview is not None else None
        return progress_of(state.record, len(state.inbox), state.last_tool, writing)

    def check_asker(self, asker: str | None, record: RunRecord | None) -> None:
        """``ValueError`` unless ``asker`` may ask about ``record``'s run: the outside
        (None) about any, a live run about those of its own tree."""
        if asker is None:
            return
        asking = self.runs.get(asker)
        if asking is None:
            raise ValueError(f"run {asker} is not live here")
        if record is None or record.root_run_id != asking.record.root_run_id:
            raise ValueError(
                "no such run in this tree: a run can only ask about runs of its own tree"
            )


def drop_preview(state: RunState | None) -> list[Write]:
    """The write that forgets ``state``'s preview, if it has one: its step was recorded
    (``Progress.stepped``), or it ended (``Lifecycle.finish``: a run stopped in the middle of
    a model call leaves none behind)."""
    if state is None or state.preview is None:
        return []
    state.preview = None
    return [DropPreview(state.run_id)]


def next_preview(before: Preview | None, msg: Streamed, ts: float) -> Preview:
    """The preview after ``msg``: emptied by a void, else what it said added to its end (a
    tool call's input after a line naming the tool), the last ``PREVIEW_CHARS`` kept."""
    same = before is not None and before.turn == msg.turn
    text = before.text if before is not None and same else ""
    chars = before.chars if before is not None and same else 0
    voided = before.voided if before is not None and same else 0
    tool = before.tool if before is not None and same else None
    if msg.void:
        return Preview(run_id=msg.run_id, turn=msg.turn, text="", chars=0, seq=msg.seq,
                       voided=voided + 1, ts=ts)  # fmt: skip
    pieces = [text]
    if msg.skipped:
        pieces.append(" … ")
    for part in msg.parts:
        if part.kind == "tool_input" and part.tool != tool:
            pieces.append(f"\n[tool {part.tool}] ")
        tool = part.tool if part.kind == "tool_input" else None
        pieces.append(part.text)
        chars += len(part.text)
    whole = "".join(pieces)
    return Preview(
        run_id=msg.run_id,
        turn=msg.turn,
        text=whole[-PREVIEW_CHARS:],
        chars=chars + msg.skipped,
        seq=msg.seq,
        voided=voided,
        tool=tool,
        ts=ts,
    )


def progress_of(
    record: RunRecord,
    unread: int,
    last_tool: tuple[str, dict[str, Any]] | None,
    writing: str | None,
) -> RunProgress:
    """A ``RunProgress`` of what is known of a run: its record and the rest."""
    outcome = record.outcome
    return RunProgress(
        run_id=record.run_id,
        agent=record.agent,
        status=record.status,
        depth=record.depth,
        parent_run_id=record.parent_run_id,
        steps=record.steps,
        tool_calls=record.tool_calls,
        last_tool=last_tool[0] if last_tool is not None else None,
        last_tool_input=dict(last_tool[1]) if last_tool is not None else {},
        usage=record.usage,
        unread_mail=unread,
        writing=writing or None,
        started_at=record.started_at,
        ended_at=record.ended_at,
        result=outcome.result if outcome is not None else None,
        error=outcome.error if outcome is not None else None,
    )
