"""Where a run is (``StatusOf``): from the supervisor's memory, else from the store.

Why apart from the supervisor actor: the answer is assembled from two places, the core's
live runs (``supervision/progress.py``, which also decides who may ask) and, for a run this
runtime does not hold (one that ended and was forgotten, one another process hosts), what
the store keeps of it: its record, its unread mail, its last ``tool_call`` event, its preview.
"""

from __future__ import annotations

from subagents.messages import EventKind, MailState, RunProgress, StatusOf
from subagents.store.base import RunStore
from subagents.supervision.core import SupervisorCore
from subagents.supervision.progress import WRITING_CHARS, progress_of

UNREAD = (MailState.ACCEPTED, MailState.DELIVERED)


def status_of(core: SupervisorCore, store: RunStore, ask: StatusOf) -> RunProgress:
    """The ``RunProgress`` of ``ask.run_id``; ``ValueError`` naming why there is none."""
    held = core.progress.status(ask.run_id, ask.asker)
    if held is not None:
        return held
    record = store.get_run(ask.run_id)
    core.progress.check_asker(ask.asker, record)
    if record is None:
        raise ValueError(f"no run {ask.run_id!r}")
    unread = len(store.mail_for(record.run_id, UNREAD))
    calls = [e for e in store.events(record.run_id) if e.kind is EventKind.TOOL_CALL]
    last = (
        (str(calls[-1].data.get("tool")), dict(calls[-1].data.get("input") or {}))
        if calls
        else None
    )
    preview = None if record.status.terminal else store.previews([record.run_id]).get(record.run_id)
    writing = preview.text[-WRITING_CHARS:] if preview is not None else None
    return progress_of(record, unread, last, writing)
