"""Resumption: what a resumed run must be told instead of redoing work.

A run resumes from its last checkpoint: the conversation up to its last model call, plus the
tool results it already had (``Checkpoint.answered``). Its other pending tool calls may have
had durable effects before the crash or the restart: a child spawned (a run whose
``request_id`` is the call's) or a mail sent (a mail whose ``request_id`` is it). Those are
not done again: the resumed agent is handed the messages it would have received (a ChildDone
for a child that ended, a SpawnReply for one still running, a MailAck for mail sent), for
all its calls; an LLM run keeps those of the turn it resumes in (a call's request id names
its turn: ``behaviour/request_ids.py``, a model may repeat a tool_use id in a later turn).

A function agent runs again from the top instead; its journal (``Replay``) says what each of
its calls was and what it was handed, so that it replays every awaited effect in order
(``behaviour/function.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec

from subagents.messages import (
    ChildDone,
    JournalEntry,
    Mail,
    MailAck,
    Outcome,
    Replay,
    RunRecord,
    SpawnReply,
)

if TYPE_CHECKING:
    from subagents.supervision.runs import RunState, RunTable

Recovered = Replay | SpawnReply | ChildDone | MailAck


def resumed_answers(
    state: RunState,
    runs: RunTable,
    mails: Sequence[Mail],
    journal: Sequence[JournalEntry],
    tree: Sequence[RunRecord] | None,
) -> tuple[Recovered, ...]:
    """The answers a start of ``state`` is handed (``Lifecycle.start``): what its earlier
    start already did is not done again; none for a first start or a retry (``resumes``).
    ``tree``: the records of its root's tree; None: those ``runs`` holds."""
    if not state.resumes:
        return ()
    if tree is None:
        tree = runs.tree_records(state.record.root_run_id)
    return recovered_messages(state.run_id, tree, mails, journal)


def recovered_messages(
    run_id: str,
    tree: Iterable[RunRecord],
    mails: Iterable[Mail],
    journal: Sequence[JournalEntry] = (),
) -> tuple[Recovered, ...]:
    """The answers a resumed ``run_id`` gets for calls whose effects already happened.

    ``tree``: the records of its root's tree (its children among them); ``mails``: the run's
    mail (sent and received). A function agent's ``journal``, if it has one, comes first, as
    a ``Replay`` with the mail its results name."""
    messages: list[Recovered] = []
    mails = list(mails)
    tree = list(tree)
    if journal:
        # the mail its results name, and the mail it sent (for a diverged replay's error)
        named = {
            mail_id
            for entry in journal
            if entry.observed and entry.kind in ("receive", "mailbox")
            for mail_id in (entry.result if isinstance(entry.result, list) else [entry.result])
        }
        kept = tuple(m for m in mails if m.mail_id in named or m.sender == run_id)
        agents = {r.run_id: r.agent for r in tree}
        messages.append(Replay(entries=_once(journal), mails=kept, agents=agents))
    for child in tree:
        if child.parent_run_id != run_id or child.request_id is None:
            continue
        messages.append(SpawnReply(request_id=child.request_id, run_id=child.run_id, queued=False))
        if child.status.terminal and not child.background:
            outcome = child.outcome or Outcome(
                run_id=child.run_id, status=child.status, error="ended before the restart"
            )
            messages.append(ChildDone(request_id=child.request_id, outcome=outcome))
    acks: dict[str, MailAck] = {}  # one per send: a topic's send made a mail per subscriber
    for mail in mails:
        rid = mail.request_id
        if mail.sender != run_id or rid is None:
            continue
        ack = acks.get(rid)
        if mail.topic is None:
            acks[rid] = MailAck(request_id=rid, mail_id=mail.mail_id, recipient=mail.recipient)
        elif ack is None:
            acks[rid] = MailAck(
                request_id=rid,
                mail_id=mail.mail_id,
                recipient=mail.address,
                recipients=(mail.recipient,),
            )
        else:
            acks[rid] = msgspec.structs.replace(
                ack, recipients=(*(ack.recipients or ()), mail.recipient)
            )
    messages.extend(acks.values())
    return tuple(messages)


def _once(journal: Sequence[JournalEntry]) -> tuple[JournalEntry, ...]:
    """``journal`` with each entry once: an entry a run told the supervisor may have been
    written twice, by the supervisor and by a later mail of the run's taken straight before
    it knew (``supervision/unsaved_journal.py``). Two equal entries of one call are one (a
    call never makes the same entry twice)."""
    seen: dict[str, list[JournalEntry]] = {}
    out: list[JournalEntry] = []
    for entry in journal:
        same = seen.setdefault(entry.request_id, [])
        if entry not in same:
            same.append(entry)
            out.append(entry)
    return tuple(out) if len(out) < len(journal) else tuple(journal)
