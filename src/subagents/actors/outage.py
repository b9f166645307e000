"""The supervisor's outage: why it takes no work on now, and the way back.

Why apart from ``SupervisorActor``: what the supervisor does when the store fails (or its
lease is lost) is one concern with state of its own (the failure, whether it is for good);
handling messages is another. The actor composes an ``Outage`` and asks it.

- The store failed (a full disk, a file gone, read-only...): what is in memory can no
  longer be made durable, so no run may go on as if it were. Every live run's agent is
  stopped and every waiting caller is told, with the store's error; the store keeps the last
  committed state. Not for good: once the store takes writes again (space freed), ``recover``
  records every run this runtime held as its caller was told (failed, with the store's
  error) and the runtime goes on taking work.
- The lease is lost (another process took the runs over, ``store.fencing``): the same stop,
  logged in one line, and for good: nothing more is written. Also when it is found lost only
  by the recovery's write (the lease lapsed while the store failed, and a `subagents stop`
  of the orphaned runs released it): what the other process wrote stands.

While it lasts, an ask is answered with the failure (``refuse_ask``), but closing and
inspecting still work.

A write of unknown fate (``UnsureWrite``: the cluster's store lost before it answered) may
have been committed: a root whose end was in it is not told at once that it failed, as if
its end were lost, but once the store says what it keeps (``recover``: its stored outcome,
or failed as recorded then), or at the close if the store never answers again (``unsure``),
or once a recovery fails ``UNSURE_HOLD_S`` after the loss: a store gone for good (its head
never started again) does not leave a caller without a timeout waiting for ever. While such
a caller waits, the store is tried again every ``UNSURE_RETRY_S`` (``retry``), not only at
the next ask or command poll; and a root the store reads ended while its writes still fail
is told that end at once.

A runtime closed while its store still fails cannot record the runs it held: the store
keeps them unfinished, and a restore (the next runtime's default) runs them again, though
their callers were told they failed. What nothing can write cannot be prevented; so it is
told: the callers' error says so from the start (``UNRECORDED``), and the close's
``StopAll`` is refused with the runs it leaves (``ClosedUnrecorded``), which the close
(``SupervisorClient.close``) asks again until its timeout, each time trying the store first:
a store that takes writes again by then records them failed, as their callers were told.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import pykka

from subagents.actors.owed import still_owed
from subagents.actors.timer import TimerService
from subagents.logs import get_logger
from subagents.messages import (
    ChildDone,
    Inspect,
    Outcome,
    PollCommands,
    RunRecord,
    RunStatus,
    StopAll,
    ToOutside,
    TreeRecords,
)
from subagents.store.base import AlreadyEnded, Fenced, RunStore, StoreError, UnsureWrite
from subagents.store.snapshot import UNFINISHED
from subagents.store.writes import write_all
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision

log = get_logger("subagents.supervisor")

LOST_LEASE = "this runtime lost its lease"
"""What a host whose runs were taken over says (its one log line, its callers' error)."""

UNRECORDED = (
    " (the run was stopped; its end is not recorded yet: should this runtime close before"
    " the store takes writes again, the store keeps the run unfinished and a restore runs"
    " it again)"
)
"""What a caller told of a store failure is told of its run besides (not for a lost lease:
the process that took the runs over runs them, by design)."""

UNSURE = (
    " (the run was stopped; the store was lost while its end was being recorded: it may or"
    " may not be recorded)"
)
"""What the caller of a root whose end was in a write of unknown fate is told of it when the
runtime closes before the store could be read."""

UNSURE_RETRY_S = 0.5
"""While a root's caller waits for the store to say what it kept (``unsure``), how often the
supervisor tries the store again (``Outage.retry``) without waiting for an ask, a spawn or a
command poll (none comes with ``command_poll_s=0``)."""

UNSURE_HOLD_S = 60.0
"""Longest a root's caller waits for the store to say what it kept of the root's end (a
write of unknown fate): past it, the next recovery that fails tells it ``UNSURE``. (About
the cluster store's own wait for one answer: Ray starts a lost head again in seconds.)"""


class ClosedUnrecorded(StoreError):
    """The close's ``StopAll`` while the store still fails: the runs it leaves unfinished in
    the store (``tops``: the highest of them, each with its unfinished subtree, as
    ``subagents stop`` takes them)."""

    def __init__(self, failure: str, tops: tuple[str, ...]) -> None:
        super().__init__(failure)
        self.failure, self.tops = failure, tops


def poll_later(timer: TimerService, supervisor: pykka.ActorRef[Any]) -> Callable[[float], None]:
    """``Outage.retry`` for a supervisor: a ``PollCommands`` told to it after the delay (the
    message at which it tries the store again, as its command poll does)."""

    def retry(delay: float) -> None:
        timer.tell_at(_RETRY, time.monotonic() + delay, supervisor, PollCommands())

    return retry


_ENDED_TRIES = 3
"""How many times one ``recover`` writes its decision when an end landed first each time
(``AlreadyEnded``): each try leaves out the runs found ended; past them, the next recovery
tries again, as for any failed write."""

_RETRY = ("outage", "retry")
"""The timer's key of the next try (one pending at a time: a new one replaces it)."""


class Outage:
    """The supervisor's failure, if any (``failure``), and whether it is for good."""

    def __init__(
        self,
        core: SupervisorCore,
        store: RunStore,
        on_outside: Callable[[ToOutside], None],
        retry: Callable[[float], None] | None = None,
    ) -> None:
        self.core = core
        self.store = store
        self.on_outside = on_outside
        self.retry = retry
        """Has the supervisor try the store again after a delay (``poll_later``): armed
        while ``unsure`` callers wait, so they are told once the store answers, not at the
        next ask."""
        self.failure: str | None = None
        """Why nothing is taken on now (None: all is well)."""
        self.for_good = False
        """The failure is a lost lease: no store coming back undoes it."""
        self.unrecorded: tuple[str, ...] = ()
        """The highest of the runs the store keeps unfinished since the failure, each
        standing for its unfinished subtree (``subagents stop`` takes them so): as the
        store says at the last try to record them (``recover``); until one could read it,
        as the core's memory said when it failed (the live runs held then, perhaps one
        whose admission was in the write that failed; the roots whose end was in it)."""
        self.read = False
        """``unrecorded`` is what the store said (not memory's guess): none there is none."""
        self.unsure: tuple[str, ...] = ()
        """Roots whose end was in a write of unknown fate (``UnsureWrite``), their callers
        not told yet: told what the store keeps once it answers (``recover``), or at the
        close (``refuse_ask``), or that the lease is lost (``_lost_lease``), or at the first
        failed recovery ``UNSURE_HOLD_S`` after the loss."""
        self._unsure_until = 0.0
        """When ``unsure``'s callers stop waiting for the store (``UNSURE_HOLD_S``)."""
        self._owed: Decision | None = None
        """A recovery decided but not written (its write failed: the store still fails, or
        failed again): the core forgot its runs as it decided, so the next attempt writes
        this one again rather than deciding anew, which would find them only in the store,
        without what memory knew of them (their unread mail, a root's outcome told). A
        write of it of unknown fate may have been committed: what the store keeps ended is
        left out of it before it is written again (``actors.owed``), so no run ends twice."""

    def begin(
        self, exc: Exception, what: str, stop_all: Callable[[], None], ended: Iterable[str]
    ) -> bool:
        """The store failed with ``exc`` (or the lease is lost: ``what``): every agent is
        stopped (``stop_all``) and every root's caller told, those of ``ended`` (roots whose
        end was not committed) too. False if it had failed already (nothing more to do)."""
        if isinstance(exc, Fenced):  # a write found the lease taken (``store.fencing``)
            what = LOST_LEASE
        if self.failure is not None:  # (its runs were stopped, their callers told, then)
            if what == LOST_LEASE:  # a store outage found to be a lost lease: for good now
                self._lost_lease(exc)
            return False
        self.for_good = what == LOST_LEASE
        self.failure = f"{what}: {exc}"
        if what == LOST_LEASE:  # the one line a fenced host logs
            log.error(f"{what}: every run is stopped, nothing more is written", error=str(exc))
        else:
            log.error(f"{what}: every run is stopped", error=str(exc))
        stop_all()
        ended = list(ended)
        runs = self.core.runs
        held = [s.record for r in runs.hosted() if (s := runs.get(r)) is not None]
        self.unrecorded = tuple(dict.fromkeys([*ended, *_highest(held)]))
        self.read = False  # (memory's guess: a run whose end was lost may not be in it)
        roots = [s.run_id for s in self.core.runs if s.record.parent_run_id is None]
        told = self.failure if self.for_good else self.failure + UNRECORDED
        # a write that may have been committed, or one refused because a run of it was
        # ended meanwhile by another writer (``AlreadyEnded``: that end stands): its roots'
        # ends are told as the store keeps them, once it can be read (told failed now, one
        # kept ended told two things)
        told_later = isinstance(exc, UnsureWrite | AlreadyEnded) and not self.for_good
        self.unsure = tuple(ended) if told_later else ()
        self._unsure_until = time.monotonic() + UNSURE_HOLD_S
        for run_id in dict.fromkeys([*ended, *roots]):
            if run_id in self.unsure:
                continue
            outcome = Outcome(
                run_id=run_id, status=RunStatus.FAILED, error_kind="store", error=told
            )
            self.on_outside(ChildDone(request_id=run_id, outcome=outcome))
        self._retry_unsure()
        return True

    def _retry_unsure(self) -> None:
        """While callers wait on ``unsure``, the store is tried again in a while."""
        if self.unsure and self.retry is not None:
            self.retry(UNSURE_RETRY_S)

    def recover(self) -> Decision | None:
        """Whether the store takes writes again (not after a lost lease: that is for good):
        if it does, every run this runtime held, and every run the store still has
        unfinished under it, is recorded as failed with the store's error in one
        transaction, and the decision (its effects to carry out once that is committed) is
        returned; None while the store still fails.

        A write of it that breaks (a bug, not the store) rolls it all back and is logged:
        nothing is told of it, since the callers were told the store's failure, which says
        their runs' end is not recorded yet, and that stays true; it is tried again (the
        same decision, ``_owed``) at the next ask, as while the store fails. (Before, it went
        through the supervisor's ``_write``, which told the waiters "recorded failed" of
        records the rollback then removed, and the error escaped the supervisor's tell.)"""
        failure = self.failure
        if failure is None or self.for_good:
            return None
        reads: list[list[RunRecord]] = []  # (what the store listed unfinished, if it read)
        owed = self._owed is not None
        try:
            for tries_left in range(_ENDED_TRIES - 1, -1, -1):
                try:
                    decision = self._write_recovery(failure, reads)
                    break
                except AlreadyEnded as exc:  # an end landed first (a late COMMIT): it stands
                    if not tries_left:
                        raise
                    log.warning(
                        "a run's end landed before the recovery's: the recovery is written"
                        " again without it",
                        error=str(exc),
                    )
                    owed = True
        except Fenced as exc:  # the lease is gone: its runs were stopped or taken over
            self._lost_lease(exc)
            return None
        except StoreError as exc:
            log.debug("the run store still fails", error=str(exc))
            if reads:  # it reads, though it does not take the writes
                self._tell_kept_ended({r.run_id for r in reads[-1]})
            if self.unsure and time.monotonic() >= self._unsure_until:  # waited long enough
                self._tell_unsure(failure, read=False)
            self._retry_unsure()
            return None
        except Exception:  # a bug in a write: rolled back, nothing told (see above)
            log.exception("the run store's recovery could not be written: tried again later")
            return None
        self._owed = None
        self.failure, self.unrecorded = None, ()
        # an owed decision may have left out a root the store keeps ended (``still_owed``:
        # its own end landed since, a write of unknown fate): each is told as read then
        self._tell_unsure(failure, recorded=() if owed else decision.reply)
        log.warning("the run store takes writes again: going on", ended=len(decision.reply))
        return decision

    def _write_recovery(self, failure: str, reads: list[list[RunRecord]]) -> Decision:
        """``recover``'s read and write: the decision written (owed before, less what the
        store keeps ended, or decided now and owed until it commits); what the store listed
        unfinished appended to ``reads``. ``AlreadyEnded`` when a run it ends was ended
        meanwhile by a write that landed first: nothing of it is committed, and the next
        try leaves that run out (``still_owed``)."""
        store = self.store
        unfinished = store.list_runs(statuses=UNFINISHED)
        reads.append(unfinished)
        unheld = [r for r in unfinished if r.owner == self.core.owner]
        self.unrecorded, self.read = _highest(unheld), True  # what the store keeps
        if self._owed is not None:  # written before: perhaps committed, if not answered
            self._owed = still_owed(self._owed, store, {r.run_id for r in unfinished})
        with store.batch():  # (it begins at the first write: after the decision)
            decision = self._owed
            if decision is None:
                decision = self._owed = self.core.store_recovered(failure, unheld)
            write_all(store, decision.writes)
        return decision

    def _tell_kept_ended(self, unfinished: set[str]) -> None:
        """The callers of ``unsure`` roots the store keeps ended (read while its writes still
        fail) told that end now: nothing changes an ended record (a recovery ends only what
        the store keeps unfinished), so it is what they would be told later. One the store
        keeps unfinished waits: a write of unknown fate may still land (a ``COMMIT`` the
        server has not finished), so unfinished is not yet its fate."""
        told = []
        for run_id in self.unsure:
            if run_id in unfinished:
                continue
            try:
                record = self.store.get_run(run_id)
            except StoreError:
                break  # (those told so far are told)
            outcome = None if record is None or record.status in UNFINISHED else record.outcome
            if outcome is not None:
                self.on_outside(ChildDone(request_id=run_id, outcome=outcome))
                told.append(run_id)
        self.unsure = tuple(r for r in self.unsure if r not in told)

    def _tell_unsure(self, failure: str, recorded: Iterable[str] = (), read: bool = True) -> None:
        """The callers of ``unsure`` told, once: what the store keeps of each root (``read``;
        ``recorded``: those just recorded failed with ``failure``), else that it failed with
        ``failure`` and may or may not be recorded."""
        unsure, self.unsure = self.unsure, ()
        failed = set(recorded)
        for run_id in unsure:
            outcome = None
            if read and run_id not in failed:
                try:
                    record = self.store.get_run(run_id)
                except StoreError:
                    record = None
                if record is not None and record.status not in UNFINISHED:
                    outcome = record.outcome
            if outcome is None:
                error = failure if read and run_id in failed else failure + UNSURE
                outcome = Outcome(
                    run_id=run_id, status=RunStatus.FAILED, error_kind="store", error=error
                )
            self.on_outside(ChildDone(request_id=run_id, outcome=outcome))

    def _lost_lease(self, exc: Exception) -> None:
        """The lease is found lost while the store failed (the recovery's write fenced, or
        the lease keeper's renewal refused): while this runtime could not write, its lease
        lapsed and another process took its runs (a `subagents stop` of them as orphans,
        which releases the lease; a `resume`, which takes it). What it wrote stands: nothing
        more is written, for good, and the failure says so (not the store's old error, as
        if the store still failed and might yet come back)."""
        if self.for_good:  # (said once)
            return
        self.for_good = True
        self.failure = f"{LOST_LEASE}: {exc}"
        log.error(f"{LOST_LEASE}: every run is stopped, nothing more is written", error=str(exc))
        self._tell_unsure(self.failure, read=False)  # (what the taker does is its own)

    def _left(self) -> None:
        """The close of a runtime that lost its lease: the runs of it that no process took
        over are said, as a close that could not record its runs says them. A `subagents
        stop` of some orphaned runs releases the whole lease: the others stay unfinished in
        the store, nobody's, and a restore runs them again (their callers were told so)."""
        left = _untaken(self.store, self.core.owner)
        if left:
            log.error(
                f"{LOST_LEASE}: runs of it stay unfinished in the store, though their callers"
                " were told they failed, and no process took them over; a restore (a"
                " Runtime's default, `subagents resume`) runs them again; `subagents stop"
                " RUN` ends one, and its subtree, in the store without running it",
                runs=list(_highest(left)),
            )

    def refuse_ask(self, message: Any) -> Any:
        """The answer to an ask while the store fails (``failure``): the store's error, but
        closing (nothing admitted after it) and inspecting still work."""
        if isinstance(message, StopAll):  # the close: its runs were stopped as it failed
            self.core.closing()  # and none is admitted after it, once the store works again
            self._tell_unsure(self.failure or "the run store failed", read=False)
            if self.for_good:  # their taker runs them (those nobody took: said, ``_left``)
                self._left()
                return ()
            if self.read and not self.unrecorded:  # the store, read, keeps none unfinished
                return ()  # nothing to record
            raise ClosedUnrecorded(self.failure or "the run store failed", self.unrecorded)
        if isinstance(message, Inspect):
            return self.core.stats(message.run_id)
        if isinstance(message, TreeRecords):  # a view of memory: nothing is written
            return self.core.tree_records(message.run_id)
        raise StoreError(self.failure or "the run store failed")


def _untaken(store: RunStore, owner: str) -> list[RunRecord]:
    """The runs of ``owner`` the store keeps unfinished while no process holds its lease
    (a read: not fenced); none if one does (taken again under the same owner: its taker
    runs them) or the store cannot be read."""
    try:
        if any(lease.owner == owner for lease in store.leases()):
            return []
        return [r for r in store.list_runs(statuses=UNFINISHED) if r.owner == owner]
    except StoreError:
        return []


def _highest(records: Iterable[RunRecord]) -> tuple[str, ...]:
    """The runs of ``records`` whose parent is not among them, each standing for its
    subtree there."""
    records = list(records)
    ids = {r.run_id for r in records}
    return tuple(r.run_id for r in records if r.parent_run_id not in ids)
