"""Isolated: the items of one decision decided each alone, a bug in one leaving out that one.

Why: a core method that decides many items in one decision (a run of sends, of read
receipts, the runs a lost host held, the runs of a cancel walk, every run at a close) changed
memory item by item into one shared ``Decided``, so an item whose handling raised (a bug)
lost the whole decision: the writes, effects and answers of the items before it too, whose
memory had already changed (memory ahead of the store, their callers never answered).

Here each item comes to its own ``Decided``, joined to the decision only once it is decided
whole; an item that raises is logged and given to ``fallback``, what it comes to instead
(its sender answered with the error, its run ended failed with it:
``Lifecycle.ended_by_bug``), itself guarded: a
fallback that raises too leaves the item out, logged. The others are decided and written as
usual. ``Admission.spawn_all`` (its ``_failed``) and ``Recorded.all`` do the same for theirs.

Plain data, no threads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from subagents.logs import get_logger
from subagents.supervision.effects import Decided
from subagents.supervision.inbox_ledger import InboxLedger

log = get_logger("subagents.supervisor")

Item = TypeVar("Item")


def failure_reason(exc: BaseException) -> str:
    """What whoever waits on an item whose handling failed (a bug) is told."""
    return f"the supervisor could not handle this request: {type(exc).__name__}: {exc}"


def each(
    items: Iterable[Item],
    decide: Callable[[Item], Decided],
    out: Decided,
    fallback: Callable[[Item, Exception], Decided | None] | None = None,
    ledger: InboxLedger | None = None,
) -> list[tuple[Item, Exception]]:
    """``decide`` each of ``items`` in order, what each comes to added to ``out`` once it is
    decided; those whose handling raised, each with its error (see the module). ``ledger``:
    where the items record what they change in the runs' inboxes, taken back for one that
    raises (``inbox_ledger``)."""
    if ledger is None:
        return _each(items, decide, out, fallback, None)
    ledger.open()
    try:
        return _each(items, decide, out, fallback, ledger)
    finally:
        ledger.close()


def _each(
    items: Iterable[Item],
    decide: Callable[[Item], Decided],
    out: Decided,
    fallback: Callable[[Item, Exception], Decided | None] | None,
    ledger: InboxLedger | None,
) -> list[tuple[Item, Exception]]:
    failed: list[tuple[Item, Exception]] = []
    for item in items:
        mark = ledger.mark() if ledger is not None else 0
        try:
            decided = decide(item)
        except Exception as exc:  # a bug: this item alone is left out
            log.exception("supervisor failed to handle an item", item=_named(item))
            if ledger is not None:  # its mail out of the inboxes it reached, or back in
                ledger.undo(mark)
            failed.append((item, exc))
            if fallback is None:
                continue
            try:
                decided_instead = fallback(item, exc)
            except Exception:
                log.exception("an item whose handling failed could not be answered")
                if ledger is not None:
                    ledger.undo(mark)
                continue
            if decided_instead is None:
                continue
            decided = decided_instead
        if out.writes or out.effects:
            out.add(decided)
        else:  # (the first: most batches are of one item, on the hot path of every mail)
            out.writes, out.effects = decided.writes, decided.effects
    return failed


def _named(item: object) -> str:
    """What the log says of ``item``: its kind and its run (a run id, or a message's run or
    sender), never its content (a mail's may be long, or private)."""
    if isinstance(item, str):
        return item
    run_id = getattr(item, "run_id", None) or getattr(item, "sender", None)
    return f"{type(item).__name__} of {run_id}"
