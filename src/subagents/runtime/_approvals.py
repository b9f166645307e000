"""Durable approvals from the outside: list the pending ones, answer one, from any process
that can open the store (docs/runtime.md, "Durable approvals").

Functions of a store (or a store's path), not of a ``Runtime``: ``subagents approvals``,
``approve`` and ``deny`` call them with no runtime at all, and so may a web console. The
answer is one transaction of the store (``RunStore.answer_approval``: refused, naming why,
for an unknown id, one answered already, or one whose run ended); the runtime hosting the run
claims it with the commands other processes post (every ``command_poll_s``; at once when the
answer is given through that runtime's ``Runtime.answer``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from subagents.messages import ApprovalRecord
from subagents.store.approvals import ApprovalRefused
from subagents.store.base import DamagedRow, RunStore
from subagents.store.superseded_approvals import (
    live,
    older_pending,
    superseded_by,
    superseded_refusal,
)
from subagents.tools.rules import Rule, RuleError

StoreLike = RunStore | str | os.PathLike[str]
"""A store, or the path of a SQLite store (opened for the call, then closed)."""


@contextlib.contextmanager
def _opened(store: StoreLike) -> Iterator[RunStore]:
    if not isinstance(store, str | os.PathLike):
        yield store
        return
    from subagents.store.sqlite import SQLiteStore

    path = Path(store).expanduser()
    if not path.exists():  # opening would create it: an answer never makes a store
        raise FileNotFoundError(f"no store at {path}")
    opened = SQLiteStore(path)
    try:
        yield opened
    finally:
        opened.close()


def pending_approvals(
    store: StoreLike, run_id: str | None = None, *, damaged: list[DamagedRow] | None = None
) -> list[ApprovalRecord]:
    """The approvals waiting for an answer, of runs that have not ended, in the order asked;
    of ``run_id``'s tree when given (``LookupError`` for an unknown run). An approvals row
    that does not read (hand-edited) raises ``DamagedRow`` naming it; with ``damaged`` given
    it is left out and named there, the others listed (the console's)."""
    with _opened(store) as opened:
        root = None
        if run_id is not None:
            record = opened.get_run(run_id)
            if record is None:
                raise LookupError(f"no run {run_id!r} in the store")
            root = record.root_run_id
        return live(opened, opened.list_approvals(root_run_id=root, damaged=damaged), damaged)


def answer_approval(
    store: StoreLike,
    approval_id: str,
    allow: bool,
    reason: str | None = None,
    *,
    remember: str | None = None,
) -> ApprovalRecord:
    """Allow or deny a pending approval; the approval as answered. ``reason`` is told to the
    model (for ``AskUserQuestion``, it is the answer). ``remember``, with an allow: a
    permission rule (``Bash(pytest:*)``) that answers the later asks of the run's tree it
    matches, as this one was (it only answers asks: what the tree's permissions deny stays
    denied). ``ApprovalRefused`` (a ``ValueError``) naming why it cannot be given."""
    if not isinstance(allow, bool):
        raise TypeError(f"allow must be True or False, got {allow!r}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be text or None, got {type(reason).__name__}")
    _check_utf8(reason, "the reason")
    _check_utf8(remember, "the rule to remember")
    if remember is not None:
        if not allow:
            raise ApprovalRefused("a rule to remember goes with an allow, not a deny")
        try:
            remember = Rule.parse(remember).text
        except RuleError as exc:
            raise ApprovalRefused(f"cannot remember it: {exc}") from None
    with _opened(store) as opened:
        asked = opened.get_approval(approval_id)
        if asked is not None and older_pending(asked):
            of_its_run = opened.list_approvals(pending=False, run_id=asked.run_id)
            later = superseded_by(asked, of_its_run)
            if later is not None:
                raise ApprovalRefused(superseded_refusal(asked, later))
        return opened.answer_approval(approval_id, allow, reason, remember)


def _check_utf8(text: str | None, what: str) -> None:
    """``ApprovalRefused`` unless ``text`` can be kept (the store keeps UTF-8): a lone
    surrogate (bytes that were not UTF-8, decoded with ``surrogateescape``) failed deep in
    the store's transaction with a ``UnicodeEncodeError``."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApprovalRefused(
            f"{what} is not UTF-8 text (character {exc.start} is {text[exc.start]!r})"
        ) from None


def remembered_rules(store: RunStore, root_run_id: str) -> tuple[str, ...]:
    """The allow rules remembered for the tree of ``root_run_id``, in the order given."""
    answered = store.list_approvals(pending=False, root_run_id=root_run_id)
    return tuple(a.remember for a in answered if a.remember and a.status == "allowed")
