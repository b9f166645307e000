"""A run's end refused because another writer ended the run first, outside a recovery: only
that end is dropped, and everything else of its transaction is written again.

Why: the store keeps one end per run (``store.base.AlreadyEnded``: a trigger on SQLite and
PostgreSQL, a check in the memory store) and refuses a second end with the whole
transaction it was in. Outside a recovery (whose own case is ``actors.owed``) that
transaction is a decision of the supervisor's, written alone, or its open group of many
decisions (``SupervisorActor._in_group``); before, its refusal was taken for a store outage
(``actors.outage``): every other write of the group was lost, every live run of the runtime
stopped and recorded failed, though the store was well. Another writer ending a run this
runtime holds is rare (a live host is fenced first when `subagents stop` takes its orphaned
runs, ``store.fencing``), but nothing else of the runtime need pay for it.

So the supervisor keeps the writes of its open group (``EndRace.kept``, the writes of each
decision written in it, in order), and when the store refuses an end (at a decision's write,
or at the group's commit), the group is rolled back and written again, in one transaction
of its own, less the writes about each run the store keeps ended with another end
(``refused``: its record, outcome and end event: ``owed.about``, ``_stands``); the
store is read in that transaction (SQLite: its write lock held from the read, so no end can
land between; PostgreSQL: one may, and it is tried again, up to ``TRIES``). For such a run:

- its requester (the outside for a root, its parent's tool call) is told the outcome the
  store keeps, not the runtime's, and that outcome is marked delivered;
- its subscribers are shown the end event the store keeps (none if its writer appended
  none), not the runtime's end event, which the store does not keep; its events saying it
  lives (a refused wait's ``waiting``: ``LIVE_KINDS``) are neither written nor shown; its
  other events (a dead letter of its unread mail, a step it took) are written and shown;
- the rest of the decision stands: its agent was stopped, its slot freed, its children
  cancelled (their reason names the runtime's end), its unread mail made dead letters, as
  for any end: the run ended either way.

A write that fails for another reason, or an end refused again ``TRIES`` times, goes
through the outage as before (``SupervisorActor._halt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import msgspec

from subagents.actors.owed import END_KINDS, about
from subagents.actors.told_answers import rolled_back
from subagents.logs import get_logger
from subagents.messages import (
    Batch,
    ChildDone,
    DeliverMail,
    Event,
    EventKind,
    Mail,
    Outcome,
    RunRecord,
)
from subagents.store.base import READ_SLICE, AlreadyEnded, RunStore
from subagents.store.memory import MemoryStore
from subagents.store.writes import (
    AppendEvent,
    DropPreview,
    DropSubscriptions,
    OutcomeDelivered,
    SaveMails,
    SaveRun,
    Write,
    write_all,
)
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision, Effect, Publish, Tell, TellOutside
from subagents.supervision.outcomes import REPORT_KINDS, background_report

log = get_logger("subagents.supervisor")

TRIES = 3
"""How many times the writes are written again when an end lands first each time (on
PostgreSQL, between the read and the write); past them, the refusal is the outage's."""

ELSEWHERE = "the run was ended by another writer; this is the end the store keeps"
"""The error of the outcome a requester is told of a run whose end the store keeps without
an outcome (a writer that saved only its record)."""


class EndRace:
    """The supervisor's writes of its open group, kept until it commits, and the writing
    again of a decision or a group whose end the store refused (the module's why)."""

    def __init__(self, actor: Any, store: RunStore, write_batch: Any) -> None:
        """``actor``: the ``SupervisorActor`` (its ``_group`` read: whether a group is
        open); ``write_batch``: its writer of one decision's writes in one batch."""
        self.actor = actor
        self.store = store
        self._write_batch = write_batch
        self._inner = getattr(store, "writes_go_to", store)
        """The store under the fence (``FencedStore``): whether its group rolls back."""
        self.kept: list[Write] = []
        """The writes of the open group written so far, in order."""
        self._of: object = None
        """The group ``kept`` belongs to (a group rolled back by an outage leaves its
        writes here: the next group's first write starts them again)."""

    def write(self, decision: Decision) -> None:
        """``decision``'s writes (in the open group, if any, else a transaction of their
        own); an end the store refuses: written again without it, ``decision.effects``
        rewritten in place (the group's too, carried out now: the group is over)."""
        writes = decision.writes
        try:
            self._write_batch(writes)
        except AlreadyEnded as exc:
            self._again(exc, decision)
            return
        group = self.actor._group  # (``held`` written out: a call per decision less)
        if group is not None:
            if self._of is not group:
                self._of, self.kept = group, []
            self.kept += writes

    def held(self, writes: Sequence[Write]) -> None:
        """``writes``, written in the open group (if any), kept with it."""
        group = self.actor._group
        if group is None:
            return
        if self._of is not group:
            self._of, self.kept = group, []
        self.kept += writes

    def write_all(self, writes: Sequence[Write]) -> None:
        """``writes`` written in the open group and kept with it (``records_written``)."""
        write_all(self.store, writes)
        self.held(writes)

    def commit(self, group: AbstractContextManager[None], held: list[Effect]) -> None:
        """``group`` committed; if the store refuses an end in it, written again without
        it, ``held`` (its effects) rewritten in place. A ``StoreError`` raised otherwise."""
        kept, self.kept, self._of = (self.kept if self._of is group else []), [], None
        try:
            group.__exit__(None, None, None)
        except AlreadyEnded as exc:  # (``held`` extended in place: the halt's, if it fails)
            held[:] = write_again(self.store, kept, held, exc, self.actor.core)

    def _again(self, exc: AlreadyEnded, decision: Decision) -> None:
        """The open group (if any) rolled back and its writes written again with
        ``decision``'s, less the refused ends; its held effects go before ``decision``'s."""
        actor = self.actor
        core = actor.core
        if actor._group is not None and isinstance(self._inner, MemoryStore):
            # its group is its lock: what the group wrote before stays (each decision's
            # writes are all or nothing, ``memory_undo``), so this decision alone again
            effects = decision.effects  # (extended in place: a failure's handler sees all)
            decision.effects[:] = write_again(self.store, decision.writes, effects, exc, core)
            return
        group, actor._group = actor._group, None
        writes: list[Write] = []
        held: list[Effect] = []
        if group is not None:
            writes = self.kept if self._of is group else []
            self.kept, self._of = [], None
            held, actor._held, actor._grouped = actor._held, [], 0
            rolled_back(group, exc)
        every = [*held, *decision.effects]
        try:
            effects = write_again(self.store, [*writes, *decision.writes], every, exc, core)
        except BaseException:
            actor._held = every  # (the halt tells the roots that ended in them)
            raise
        decision.effects[:] = effects


def write_again(
    store: RunStore,
    writes: Sequence[Write],
    effects: list[Effect],
    exc: AlreadyEnded,
    core: SupervisorCore | None = None,
) -> list[Effect]:
    """``writes`` in one transaction of ``store`` less those about the runs whose end it
    refused (``refused``, read in that transaction); the effects to carry out in place of
    ``effects``. ``core``: of those runs, the ones it holds live are ended there
    (``ended_here``: a live save of theirs was refused), their writes written in the same
    transaction and their effects appended to ``effects`` in place (a caller whose write
    fails tells their waiters too). ``exc`` raised again when an end is refused ``TRIES``
    times; any other ``StoreError`` raised as it comes."""
    for _ in range(TRIES):
        try:
            with store.batch():
                writes, kept = ended_here(store, writes, effects, core)
                out: Sequence[Effect] = effects
                if kept:
                    writes, out = _without(store, kept, writes, effects, core)
                write_all(store, writes)
            if kept:
                log.warning(
                    "a run's end was refused: another writer ended it first; its end is the"
                    " store's, the rest written again",
                    runs=sorted(kept),
                )
            return list(out)
        except AlreadyEnded as again:
            exc = again
    raise exc


def as_kept(
    store: RunStore,
    writes: Sequence[Write],
    effects: list[Effect],
    core: SupervisorCore | None = None,
) -> tuple[list[Write], list[Effect]]:
    """``writes`` and ``effects`` less what is about the runs whose end ``store`` keeps from
    another writer (``refused``, read in the caller's open transaction), for a writer that
    holds the store's write lock from that read to its write (SQLite: a command poll's claim
    took it; elsewhere an end landing between is refused and goes through the outage);
    ``core``, ``effects`` extended in place: as ``write_again``'s."""
    writes, kept = ended_here(store, writes, effects, core)
    if not kept:
        return writes, list(effects)
    log.warning(
        "a run's end was refused: another writer ended it first; its end is the store's,"
        " the rest written",
        runs=sorted(kept),
    )
    return _without(store, kept, writes, effects, core)


def ended_here(
    store: RunStore, writes: Sequence[Write], effects: list[Effect], core: SupervisorCore | None
) -> tuple[list[Write], dict[str, RunRecord]]:
    """``writes`` (with what ending the runs below comes to) and the runs of them the store
    keeps ended by another writer (``refused``). Those of them ``core`` still holds live (a
    live save of theirs, a step or a wait, was refused: the store keeps them ended) are
    ended in it now (``SupervisorCore.ended_elsewhere``: the agent stopped, its children
    cancelled...), its writes appended to the writes returned and its effects to
    ``effects`` in place; the store is read again for the children it ends (another
    writer may have ended them too: `subagents stop` ends a subtree)."""
    kept = refused(store, writes)
    if kept and core is not None:
        live = [run_id for run_id in kept if core.runs.live(run_id) is not None]
        if live:
            ended = core.ended_elsewhere(live)
            writes = [*writes, *ended.writes]
            effects.extend(ended.effects)
            kept = refused(store, writes)
    return list(writes), kept


def refused(store: RunStore, writes: Sequence[Write]) -> dict[str, RunRecord]:
    """The runs saved in ``writes`` that ``store`` keeps ended with an end other than each
    save of them here (a second end, or a live status: that end undone, which it refuses
    too: ``store.base.AlreadyEnded``): what it keeps of each. A slice of them at a time
    (``READ_SLICE``, one statement each)."""
    saved: dict[str, list[RunRecord]] = {}
    for write in writes:
        if type(write) is SaveRun:
            record = write.record
            if (saves := saved.get(record.run_id)) is None:
                saves = saved[record.run_id] = []
            saves.append(record)
    ids = list(saved)
    kept: dict[str, RunRecord] = {}
    for at in range(0, len(ids), READ_SLICE):
        for run_id, stored in store.get_runs(ids[at : at + READ_SLICE]).items():
            end = (stored.status, stored.ended_at)
            if stored.status.terminal and any((r.status, r.ended_at) != end for r in saved[run_id]):
                kept[run_id] = stored
    return kept


def _without(
    store: RunStore,
    kept: dict[str, RunRecord],
    writes: Sequence[Write],
    effects: Sequence[Effect],
    core: SupervisorCore | None = None,
) -> tuple[list[Write], list[Effect]]:
    """``writes`` and ``effects`` for the runs of ``kept`` (ended by another writer) as the
    store keeps them (the module's list; ``core``: its recipients' inboxes hold the reports
    as rewritten)."""
    reports = _reports(kept, writes)
    rest: list[Write] = [w for w in writes if about(w) not in kept or _stands(w)]
    out: list[Effect] = []
    told: list[str] = []
    shown: set[str] = set()
    if reports:
        rest = [_mails_kept(w, reports) if type(w) is SaveMails else w for w in rest]
        effects = [_delivered_kept(e, reports) if type(e) is Tell else e for e in effects]
        if core is not None:
            for mail in reports.values():
                state = core.runs.get(mail.recipient)
                if state is not None and mail.mail_id in state.inbox:
                    state.inbox[mail.mail_id] = mail
    for effect in effects:
        if type(effect) is Publish:
            run_id = effect.event.run_id
            if run_id in kept and effect.event.kind in END_KINDS:
                if run_id not in shown:  # where the runtime's first event of it was
                    shown.add(run_id)
                    out += (Publish(e) for e in _kept_end(store, run_id))
                continue
            if run_id in kept and effect.event.kind in LIVE_KINDS:
                continue  # (not written either: ``_stands``)
        elif type(effect) is TellOutside or type(effect) is Tell:
            effect = _told_kept(effect, kept, told)
        out.append(effect)
    rest += (OutcomeDelivered(run_id) for run_id in told)
    return rest, out


def _reports(kept: dict[str, RunRecord], writes: Sequence[Write]) -> dict[str, Mail]:
    """The reports in ``writes`` of a background (or detached) run of ``kept`` mailed for
    the runtime's end (``lifecycle``'s ``background_report`` of the end it saved), by mail
    id, each as the end the store keeps says: the report the parent reads is that end."""
    ours = {
        w.record.run_id: w.record
        for w in writes
        if type(w) is SaveRun and w.record.run_id in kept and w.record.status.terminal
    }
    if not ours:
        return {}
    reports: dict[str, Mail] = {}
    for write in writes:
        if type(write) is not SaveMails:
            continue
        for mail in write.mails:
            ended = ours.get(mail.sender)
            if ended is None or ended.outcome is None:
                continue
            stored = kept[mail.sender]
            for kind in REPORT_KINDS:
                if mail.content == background_report(ended, ended.outcome, kind):
                    content = background_report(stored, _outcome_kept(stored), kind)
                    reports[mail.mail_id] = msgspec.structs.replace(mail, content=content)
    return reports


def _mails_kept(write: SaveMails, reports: dict[str, Mail]) -> SaveMails:
    return SaveMails(tuple([reports.get(m.mail_id, m) for m in write.mails]))


def _delivered_kept(effect: Tell, reports: dict[str, Mail]) -> Tell:
    """``effect`` with the reports of ``reports`` it delivers as rewritten."""
    message: Any = effect.message
    if type(message) is Batch:
        message = Batch(messages=tuple([_kept_in(m, reports) for m in message.messages]))
        return Tell(effect.run_id, message)
    return Tell(effect.run_id, _kept_in(message, reports))


def _kept_in(message: Any, reports: dict[str, Mail]) -> Any:
    if type(message) is DeliverMail:
        return DeliverMail(mails=tuple([reports.get(m.mail_id, m) for m in message.mails]))
    return message


LIVE_KINDS = frozenset(
    {
        EventKind.QUEUED,
        EventKind.STARTED,
        EventKind.WAITING,
        EventKind.PARKED,
        EventKind.UNPARKED,
        EventKind.RESTARTED,
        EventKind.PLACED,
    }
)
"""The events saying a run is live (queued, started, waiting...): of a run the store keeps
ended by another writer, neither written nor shown (its live save was refused: they would
say it lives after its end). What it did (a ``step``, a ``tool_call``, a mail) is written."""


def _stands(write: Write) -> bool:
    """Whether ``write``, about a run the store keeps ended by another writer, is written all
    the same: what the runtime's end did besides ending it (it ended either way), which no
    end refuses: an event that is neither an end nor a live one (``LIVE_KINDS``: a refused
    wait's ``waiting``, since session 30), as a ``dead_letter`` (whose mail's state is
    written: ``SetMailsState``), its preview and subscriptions dropped (as in memory)."""
    if isinstance(write, AppendEvent):
        kind = write.event.kind
        return kind not in END_KINDS and kind not in LIVE_KINDS
    return isinstance(write, DropPreview | DropSubscriptions)


def _told_kept(effect: Any, kept: dict[str, RunRecord], told: list[str]) -> Any:
    """``effect`` (a ``Tell`` or ``TellOutside``) with each ``ChildDone`` of a run of
    ``kept`` carrying the outcome the store keeps; those runs appended to ``told``."""
    message = effect.message
    if type(message) is ChildDone:
        return _with(effect, _done_kept(message, kept, told))
    if type(message) is Batch:
        messages = tuple(
            _done_kept(m, kept, told) if type(m) is ChildDone else m for m in message.messages
        )
        return _with(effect, Batch(messages=messages))
    return effect


def _with(effect: Any, message: Any) -> Any:
    if type(effect) is Tell:
        return Tell(effect.run_id, message)
    return TellOutside(message)


def _done_kept(done: ChildDone, kept: dict[str, RunRecord], told: list[str]) -> ChildDone:
    record = kept.get(done.outcome.run_id)
    if record is None:
        return done
    told.append(record.run_id)
    return ChildDone(request_id=done.request_id, outcome=_outcome_kept(record))


def _outcome_kept(record: RunRecord) -> Outcome:
    """The outcome the store keeps of ``record`` (ended by another writer), or, if its writer
    saved none, one saying so (``ELSEWHERE``)."""
    return record.outcome or Outcome(
        run_id=record.run_id, status=record.status, error_kind="store", error=ELSEWHERE
    )


def _kept_end(store: RunStore, run_id: str) -> list[Event]:
    """The end event the store keeps of ``run_id`` (none, if its writer appended none)."""
    return [e for e in store.events(run_id) if e.kind in END_KINDS][-1:]
