"""What a run's model is writing, for ``subagents log -f``: its preview, as new entries.

Why apart from the transcript: the transcript is the run's history, read from what the
store keeps for good; this is the scratch the store keeps of the step under way (``Preview``,
one row per streaming run, replaced a few times a second, dropped when the step is
recorded). Each poll turns what was added to it since the last into one ``writing`` entry;
an attempt that broke off (the model call is tried again) becomes an entry saying that what
was shown of it is void. Once the step is recorded its ``assistant`` and ``tool_use``
entries say what was written for good.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from subagents.cli.transcript import Entry
from subagents.messages import Preview, RunRecord
from subagents.store.base import RunStore

VOID = "(the model call broke off and is tried again: what it wrote above is void)"


class WritingFollower:
    """The preview of one run, followed: ``poll`` gives what is new since the last poll."""

    def __init__(self) -> None:
        self._turn: int | None = None
        self._voided = 0
        self._shown = 0
        """Characters of the current attempt already shown."""

    def poll(self, store: RunStore, record: RunRecord) -> list[Entry]:
        """New ``writing`` entries of ``record``'s run (none once it has ended)."""
        if record.status.terminal:
            return []
        preview = store.previews([record.run_id]).get(record.run_id)
        if preview is None:
            return []
        return self.seen(preview)

    def seen(self, preview: Preview) -> list[Entry]:
        """The entries ``preview`` adds to what was shown."""
        entries: list[Entry] = []
        data: dict[str, object] = {"turn": preview.turn, "seq": preview.seq}
        if preview.turn != self._turn:
            self._turn, self._voided, self._shown = preview.turn, preview.voided, 0
        elif preview.voided > self._voided:
            self._voided, self._shown = preview.voided, 0
            entries.append(self._entry(preview, VOID, {**data, "void": True}))
        new = preview.chars - self._shown
        if new > 0:
            text = preview.text[-new:] if new <= len(preview.text) else "…" + preview.text
            self._shown = preview.chars
            entries.append(self._entry(preview, text, data))
        return entries

    @staticmethod
    def _entry(preview: Preview, text: str, data: Mapping[str, object]) -> Entry:
        return Entry(ts=preview.ts or time.time(), kind="writing", run_id=preview.run_id,
                     text=text, data=dict(data))  # fmt: skip
