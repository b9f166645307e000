"""Undoing a MemoryStore's writes: what makes a batch of writes (``write_all``) all or nothing.

Why: a decision's writes go into the store as one batch; should one of them raise (a bug, a
refused argument), SQLite and PostgreSQL roll the batch back (its savepoint) and the store
keeps none of them, while a MemoryStore kept those before it applied: the stores disagreed,
and memory held half a decision (a run's record completed, its outcome missing). So before
each write, ``undo_of`` takes what that write is about to change (the run's record, the
length of a list it appends to, a dict entry...), as a small undo step; a batch that raises
runs its steps back in reverse order (``MemoryStore._apply_batch``). Nothing is copied whole
on the way of every write: a step holds only the values the write replaces.

Plain functions over the store's dictionaries; the caller holds the store's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, MutableMapping
from typing import Any, Protocol

from subagents.store.writes import (
    AddToCheckpoint,
    AppendEvent,
    DropPreview,
    DropSubscriptions,
    OutcomeDelivered,
    PostCommand,
    ReleaseLease,
    SaveApproval,
    SaveCheckpoint,
    SaveJournal,
    SaveMails,
    SaveOutcome,
    SavePreview,
    SaveRun,
    SaveSubscription,
    SetMailsState,
    Write,
)


class MemoryStore(Protocol):
    """The tables of ``store.memory.MemoryStore`` the writes change (named here, not
    imported: that module imports this one)."""

    _runs: dict[str, Any]
    _events: dict[str, list[Any]]
    _stream: list[Any]
    _checkpoints: dict[str, Any]
    _mail: dict[str, Any]
    _mail_of_run: dict[str, list[str]]
    _outcomes: dict[str, Any]
    _journals: dict[str, list[Any]]
    _subscriptions: dict[tuple[str, str], Any]
    _commands: list[Any]
    _leases: dict[str, Any]
    _approvals: dict[str, Any]
    _previews: dict[str, Any]


Undo = Callable[[], None]

MISSING: Any = object()
"""What a dict held under a key it did not hold (an undo puts the key out again)."""

Step = Undo | tuple[dict[Any, Any], Hashable, Any]
"""One write's undo: a step to call, or ``(dict, key, the value it held or MISSING)``."""


def _entry(table: MutableMapping[Any, Any], key: Hashable) -> Undo:
    """Put ``table[key]`` back as it is now (absent: removed again)."""
    old = table.get(key, MISSING)

    def undo() -> None:
        if old is MISSING:
            table.pop(key, None)
        else:
            table[key] = old

    return undo


def _length(table: dict[Any, list[Any]], key: Hashable) -> Undo:
    """Cut the list ``table[key]`` back to its length now (absent: removed again)."""
    kept = table.get(key)
    size = None if kept is None else len(kept)

    def undo() -> None:
        if size is None:
            table.pop(key, None)
        elif kept is not None:
            del kept[size:]
            table[key] = kept

    return undo


def _whole(table: dict[Any, Any]) -> Undo:
    """Put ``table`` back whole (a small one: leases, approvals, subscriptions)."""
    old = dict(table)

    def undo() -> None:
        table.clear()
        table.update(old)

    return undo


def _all(steps: list[Undo]) -> Undo:
    def undo() -> None:
        for step in reversed(steps):
            step()

    return undo


def roll_back(store: MemoryStore, steps: list[Step], stream_was: int) -> None:
    """Undo a batch's writes: ``steps`` in reverse order, then the events appended since the
    stream was ``stream_was`` long (each out of its run's list too)."""
    for step in reversed(steps):
        if isinstance(step, tuple):
            table, key, old = step
            if old is MISSING:
                table.pop(key, None)
            else:
                table[key] = old
        else:
            step()
    stream, events = store._stream, store._events
    while len(stream) > stream_was:
        event = stream.pop()
        kept = events.get(event.run_id)
        if kept:
            kept.pop()
            if not kept:
                del events[event.run_id]


def _event(store: MemoryStore, write: AppendEvent) -> Undo:
    return _all([_length(store._events, write.event.run_id), _commands_or_stream(store, False)])


def _commands_or_stream(store: MemoryStore, commands: bool) -> Undo:
    """Cut the event stream (or the command list) back to its length now."""
    kept = store._commands if commands else store._stream
    size = len(kept)

    def undo() -> None:
        del kept[size:]

    return undo


def _mails(store: MemoryStore, write: SaveMails) -> Undo:
    runs = {run for m in write.mails for run in (m.sender, m.recipient)}
    steps = [_length(store._mail_of_run, run) for run in runs]
    steps += [_entry(store._mail, m.mail_id) for m in write.mails]
    return _all(steps)


def _outcome(store: MemoryStore, write: SaveOutcome) -> Undo:
    run_id = write.outcome.run_id  # (a run's end drops its journal: back too)
    return _all([_entry(store._outcomes, run_id), _entry(store._journals, run_id)])


def _approval(store: MemoryStore, write: SaveApproval) -> Undo:
    return _all([_whole(store._approvals), _commands_or_stream(store, True)])


_UNDO: dict[type[Any], Callable[[MemoryStore, Any], Undo]] = {
    SaveRun: lambda s, w: _entry(s._runs, w.record.run_id),
    AppendEvent: _event,
    SaveCheckpoint: lambda s, w: _entry(s._checkpoints, w.checkpoint.run_id),
    AddToCheckpoint: lambda s, w: _entry(s._checkpoints, w.delta.run_id),
    SaveMails: _mails,
    SetMailsState: lambda s, w: _all([_entry(s._mail, i) for i in w.mail_ids]),
    SaveOutcome: _outcome,
    OutcomeDelivered: lambda s, w: _entry(s._outcomes, w.run_id),
    PostCommand: lambda s, w: _commands_or_stream(s, True),
    SaveJournal: lambda s, w: _length(s._journals, w.run_id),
    ReleaseLease: lambda s, w: _entry(s._leases, w.owner),
    SaveApproval: _approval,
    SaveSubscription: lambda s, w: _whole(s._subscriptions),
    DropSubscriptions: lambda s, w: _whole(s._subscriptions),
    SavePreview: lambda s, w: _entry(s._previews, w.preview.run_id),
    DropPreview: lambda s, w: _entry(s._previews, w.run_id),
}
"""What each kind of write changes in a ``MemoryStore``, as the step that puts it back."""


def undo_of(store: MemoryStore, write: Write) -> Undo:
    """The step that puts back what ``write`` is about to change in ``store``."""
    return _UNDO[type(write)](store, write)
