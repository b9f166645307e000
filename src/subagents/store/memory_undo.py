"""Undoing a MemoryStore's writes: what makes a batch of writes (``write_all``) all or nothing.

Why: a decision's writes go into the store as one batch; should one of them raise (a bug, a
refused argument), SQLite and PostgreSQL roll the batch back (its savepoint) and the store
keeps none of them, while a MemoryStore kept those before it applied: the stores disagreed,
and memory held half a decision (a run's record completed, its outcome missing). So before
each write, ``undo_of`` takes what that write is about to change (the run's record, the
length of a list it appends to, a dict entry...), as a small undo step; a batch that raises
runs its steps back in reverse order (``roll_back``). Nothing is copied whole on the way of
every write: a step holds only the values the write replaces. And the kinds every run writes
(its record, its events, its outcome) take no step at all: ``MemoryStore._apply_batch`` keeps
only the value a record or an outcome replaces, if any (a dict's ``in`` and ``[]``, no call),
and ``roll_back`` undoes the rest from the writes themselves (a key kept anew put out again,
an event appended popped), on the exception's path alone.

Plain functions over the store's dictionaries; the caller holds the store's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, MutableMapping, Sequence
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


def roll_back(
    store: MemoryStore,
    writes: Sequence[Write],
    skip: Collection[int],
    failed: int,
    replaced: dict[int, Any],
) -> None:
    """Undo a batch's ``writes`` up to the one at ``failed`` (which raised), last first.
    ``replaced``: by a write's place, the undo step taken before it (a kind the store
    keeps through its method: the one that raised too, which may have half applied), or
    what a record or an outcome replaced (none: the write kept it anew, and raised before
    changing anything if it is the one that failed)."""
    for i in range(min(failed, len(writes) - 1), -1, -1):
        if i in skip:
            continue
        write, old = writes[i], replaced.get(i, MISSING)
        if callable(old):
            old()
        elif type(write) is SaveMails:  # (how many mails were kept before it)
            if old is not MISSING:
                _drop_mails_after(store, old)
        elif type(write) is SetMailsState:  # (each mail it changed, as it was)
            for mail_id, mail in reversed(old if old is not MISSING else ()):
                store._mail[mail_id] = mail
        elif type(write) is SaveJournal:  # (its run's journal's length before it; None: none)
            if old is not MISSING:
                _cut(store._journals, write.run_id, old)
        elif i == failed:  # (a record, event or outcome kept directly: nothing changed)
            continue
        elif type(write) is AppendEvent:
            _pop_event(store, write)
        elif type(write) is SaveRun:
            _put_back(store._runs, write.record.run_id, old)
        elif type(write) is SaveOutcome:
            outcome, journal = (MISSING, MISSING) if old is MISSING else old
            _put_back(store._outcomes, write.outcome.run_id, outcome)
            _put_back(store._journals, write.outcome.run_id, journal)


def _put_back(table: dict[Any, Any], key: Hashable, old: Any) -> None:
    if old is MISSING:
        table.pop(key, None)
    else:
        table[key] = old


def _cut(table: dict[Any, list[Any]], key: Hashable, size: int | None) -> None:
    """The list ``table[key]`` back to ``size`` entries (None: out of ``table`` again)."""
    if size is None:
        table.pop(key, None)
    elif (kept := table.get(key)) is not None:
        del kept[size:]


def _drop_mails_after(store: MemoryStore, kept: int) -> None:
    """The mails kept after the first ``kept`` out again (a dict keeps its order: they are
    its last), each out of its runs' lists too (the last there)."""
    mails, of_run = store._mail, store._mail_of_run
    while len(mails) > kept:
        mail_id, mail = mails.popitem()
        for run_id in dict.fromkeys((mail.sender, mail.recipient)):
            ids = of_run.get(run_id)
            if ids and ids[-1] == mail_id:
                ids.pop()
                if not ids:
                    del of_run[run_id]


def _pop_event(store: MemoryStore, write: AppendEvent) -> None:
    """The event ``write`` appended, out of the stream and its run's list (the last of each:
    the batch's later appends are undone already)."""
    store._stream.pop()
    run_id = write.event.run_id
    kept = store._events[run_id]
    kept.pop()
    if not kept:
        del store._events[run_id]


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
    SaveJournal: lambda s, w: _all(
        [_length(s._journals, w.run_id), *[_entry(s._mail, i) for i in w.read_mail]]
    ),
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
