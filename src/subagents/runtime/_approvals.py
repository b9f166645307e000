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
import hashlib
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from subagents.messages import ApprovalRecord
from subagents.store.approvals import ApprovalRefused
from subagents.store.base import RunStore
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


def pending_approvals(store: StoreLike, run_id: str | None = None) -> list[ApprovalRecord]:
    """The approvals waiting for an answer, of runs that have not ended, in the order asked;
    of ``run_id``'s tree when given (``LookupError`` for an unknown run)."""
    with _opened(store) as opened:
        if run_id is None:
            return live(opened, opened.list_approvals())
        record = opened.get_run(run_id)
        if record is None:
            raise LookupError(f"no run {run_id!r} in the store")
        return live(opened, opened.list_approvals(root_run_id=record.root_run_id))


def superseded_by(
    approval: ApprovalRecord, of_its_run: Iterable[ApprovalRecord]
) -> ApprovalRecord | None:
    """The ask that replaced pending ``approval``, an id an older subagents made: one of
    the same run for the same call (its ``tool_use_id``, in the same retry generation) under
    another id; None if none did. (An ask of a retried run's earlier attempt is refused as
    such by the store.)

    How one is left: ids made before the turn was part of them (``approval_id_for``'s
    ``step``, session 21) differ from the ids the same call gets now, so a run resumed by a
    newer runtime asks again under a new id and nothing waits for the old one, which stayed
    pending (listed, and an answer to it reached no one, unsaid). A run of one version never
    leaves one: its next turn, the only place a call's id may come again, begins only once
    every ask of the turn before is answered. So only an id of that older scheme
    (``_older_ids``) is ever superseded: an ask under this version's id is the one its call
    waits for, whatever another ask of the same call id (a later turn's, under a model that
    repeats ids) says, and whatever the clocks of the hosts that asked them read."""
    if not _older(approval):
        return None
    older = _older_ids(approval)
    for other in of_its_run:
        if (
            other.run_id == approval.run_id
            and other.tool_use_id == approval.tool_use_id
            and other.approval_id not in older  # (this version's: one that waits now)
            and approval.retries in (None, other.retries)  # (a retry's: ``store.approvals``)
        ):
            return other
    return None


def _older_ids(approval: ApprovalRecord) -> tuple[str, str]:
    """The ids ``approval_id_for`` gave ``approval``'s call before the turn was part of
    them: with its retry generation (c6a266f..feebafa), and before that without."""
    run, use = approval.run_id, approval.tool_use_id
    return _digest(f"{run}\0{approval.retries or 0}\0{use}"), _digest(f"{run}\0{use}")


def _digest(said: str) -> str:
    return "ap" + hashlib.sha256(said.encode()).hexdigest()[:14]


def live(store: RunStore, listed: Sequence[ApprovalRecord]) -> list[ApprovalRecord]:
    """``listed`` less the pending approvals a later ask replaced (``superseded_by``): one
    read of the store per tree listed with one pending under an older id (none for a store
    this version wrote)."""
    older = [a for a in listed if _older(a)]
    if not older:
        return list(listed)
    trees = {a.root_run_id for a in older}
    asks = {root: store.list_approvals(pending=False, root_run_id=root) for root in trees}
    return [a for a in listed if superseded_by(a, asks.get(a.root_run_id, ())) is None]


def _older(approval: ApprovalRecord) -> bool:
    """A pending ask under an id an older subagents made (``_older_ids``)."""
    return approval.pending and approval.approval_id in _older_ids(approval)


def superseded_refusal(approval: ApprovalRecord, later: ApprovalRecord) -> str:
    """Why ``approval`` cannot be answered: ``later`` replaced it."""
    now = "answer that one" if later.pending else f"that one was answered: {later.status}"
    return (
        f"approval {approval.approval_id} cannot be answered: its run {approval.run_id}"
        f" ({approval.agent}) asked for the same call again under {later.approval_id} (an"
        f" id of a newer subagents, which puts the turn in it), so nothing waits for"
        f" {approval.approval_id}; {now}"
    )


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
        if asked is not None and _older(asked):
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
