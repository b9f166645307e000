"""GroupLinger: the supervisor's open group, when nobody waits on it, commits a little later.

Why: with mail taken straight from run to run (docs/architecture.md, "The mail path"), what
reaches the supervisor per mail is the record of it (the events, the step's journal and
read receipts), told after the mail was delivered: nothing waits on that group's commit but
the publication of its events. Committing it whenever the supervisor's inbox runs dry costs
a SQLite commit every step or two (a ping-pong is one message at a time); held open for up
to ``LINGER_S`` it is one commit per dozens of mails. A group whose effects tell anyone
anything (an acknowledgement, a start, an outcome: whatever is not a ``Publish``) commits
at once, as before, and so does everything else that commits a group (an ask, a message
outside the grouped kinds, ``GROUP_MAX`` messages, the supervisor stopping), and so does a
group that already holds the store's write lock (with SQLite a group takes it only at its
commit, unless something in it read or wrote directly: a checkpoint, say), so a lingering
group never makes a sender wait.

What a crash may lose is widened, not changed: the records of mail that went straight,
between its sender's commit and the supervisor's (the mail itself is its sender's commit;
a resumed run finds it by its ``request_id``, and re-reads what its lost receipts covered;
a mail decided by what a call saw that the store cannot tell again goes by the supervisor,
in or after the group holding that observation: ``MailRoutes.observed``).
"""

from __future__ import annotations

import collections
import itertools
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import pykka

from subagents.actors.timer import TimerService
from subagents.messages import Batch, Journal, MailPosted, MailRead, RunFinished
from subagents.store.base import MailRecording, RunStore
from subagents.supervision.effects import Effect, Publish

LINGER_S = 0.005
"""How long a group nobody waits on may stay open (events reach watchers that much later), and
how long the record of mail that went straight may wait to reach the supervisor."""


class CommitDue:
    """Told to the supervisor when a lingering group is due: commit it."""

    __slots__ = ()


COMMIT_DUE = CommitDue()


class ReportsDue:
    """Told to the supervisor to take the agents' reports in line (``LateReports``): those put
    up to ``upto`` (a wake-up for one report someone waits on), or all of them (the timer's,
    ``REPORTS_DUE``). ``later``: the reports put while this wake-up was on its way and not
    taken yet, each of which it takes too, instead of a wake-up of its own (``put``)."""

    __slots__ = ("later", "upto")

    def __init__(self, upto: float) -> None:
        self.upto = upto
        self.later: list[int] = []


REPORTS_DUE = ReportsDue(math.inf)

NOTHING = Batch(messages=())
"""What the supervisor handles as nothing (an empty ``Batch``)."""

RECORDS_ONLY = frozenset({MailPosted, Journal, MailRead})
"""Reports that only record what happened: the mail that went straight, the journal, read
receipts. Put in line without waking the supervisor (``mail_desk.report``), and a run of them
decided as one (``LateReports.hand``)."""

RECORDS_MOST = 50
"""Most of those messages decided as one: a group commits at ``GROUP_MAX`` (100) messages,
and a decision is not split across groups (``SupervisorActor._in_group``). A report's
messages are not split either: a run reaching it ends after that report, so it may hold
up to one report's messages more."""


class LateReports:
    """The one line in which the agents' reports go to the supervisor where senders record
    their mail (``mail_desk.report``): a report that only records what happened (mail that
    went straight, the journal, read receipts) is put there without waking the supervisor,
    which takes it within ``delay`` (``REPORTS_DUE`` from the timer) or before the next
    message it handles, whichever comes first; any other report is put there and the
    supervisor is told a ``ReportsDue`` for it at once, unless the one told last is still
    on its way (not taken yet): that one takes it too (``put``). A start of 1,000 waiting
    runs (``spawn_many``) puts a report per run while the supervisor carries the batch
    out; told a wake-up each, the supervisor handled a message per run, nearly all of them
    finding the line already taken.

    Why: in a durable ping-pong each step's record woke the supervisor's thread, which then
    took the GIL from the mail's critical path for that one report; nothing waits on it
    (its group lingers anyway). In line here, a few milliseconds of them are taken in one
    wake-up and one group.

    Order: one deque for all the runtime's agents, in the order they put (an append is one
    C call under the GIL). Every report of theirs goes through it, so they are decided in
    the order they were made; the supervisor takes them all before any other message it
    handles (``SupervisorActor.on_receive``), so whatever a run asks after its reports,
    and whatever anyone tells after, is decided after them. A wake-up takes only what was
    put up to its report: what came after waits as it would have waited in the open group
    (and the group commits as when its inbox runs dry: ``hand``)."""

    __slots__ = (
        "_alone",
        "_due",
        "_key",
        "_on_way",
        "_ref",
        "_reports",
        "_seq",
        "_supervisor",
        "_timer",
        "delay",
    )

    def __init__(self, timer: TimerService, supervisor: Any) -> None:
        """``supervisor``: the ``SupervisorActor`` whose reports these are (its ref, its
        open group and lingering: a wake-up's group commits by its rule, ``hand``)."""
        self._timer = timer
        self._supervisor = supervisor
        self._ref: pykka.ActorRef[Any] = supervisor.actor_ref
        self._key = ("late reports", id(self))
        self.delay: float = supervisor.linger.reports_delay
        self._alone = supervisor.linger.delay <= 0
        """A wake-up's last report, nothing behind it, is handed as if told alone (``hand``):
        where groups do not linger (memory), as every report was told before the line."""
        self._reports: collections.deque[tuple[int, Any]] = collections.deque()
        self._seq = itertools.count(1)
        self._on_way: dict[int, ReportsDue] = {}
        """At key 0, the wake-up told to the supervisor and not taken yet (``put``,
        ``hand``): a dict for its ``setdefault``, the one C call that lets two puts that
        both found none claim it once between them."""
        self._due = 0.0
        """When the ``REPORTS_DUE`` from the timer is due (none on its way: in the past).
        Read and set by any agent's thread without a lock: two that both see none arm two
        timers (two messages; the second finds little or nothing in line); one set after the
        timer fired sees it past."""

    def __bool__(self) -> bool:
        return bool(self._reports)

    def put(self, report: Any, wake: pykka.ActorRef[Any] | None = None) -> None:
        """``report`` (a run's reports of one handling) in line; ``wake``: the supervisor,
        told a ``ReportsDue`` for it now, or the one on its way made to take it too (None:
        it takes it within ``delay``). No lock: which put tells the one wake-up on its way is
        settled by one C call (``dict.setdefault``: two that both found none tell one, not
        two); the wake-up is let go (``hand``) before its ``later`` is read, and a report
        added to it is looked at again after: a wake-up taken meanwhile may have been read
        without it, so the report is told one of its own."""
        seq = next(self._seq)  # (one C call: two threads never draw the same)
        self._reports.append((seq, report))
        if wake is not None:
            on_way = self._on_way
            while True:
                told = on_way.get(0)
                if told is None:  # none on its way: this put claims the one, unless another
                    mine = ReportsDue(seq)  # put's claim came first (then it rides on it)
                    told = on_way.setdefault(0, mine)
                    if told is mine:
                        break
                told.later.append(seq)  # (one C call) then looked at again: if the
                if on_way.get(0) is told:  # supervisor took it meanwhile, it may have read
                    return  # ``later`` before the append: look for one anew
            try:
                wake.tell(mine)
            except BaseException:  # (the supervisor stopped: no report rides on it)
                if on_way.get(0) is mine:
                    del on_way[0]
                raise
            return
        now = time.monotonic()
        if self._due <= now:
            self._due = due = now + self.delay
            # A timer of its own per arm (the seq in its key), never one replacing another:
            # two threads that both saw none armed may write ``_due`` in one order and arm in
            # the other, and with one key the earlier deadline replaced the later one, which
            # ``_due`` kept: the reports put after the earlier fired waited for the
            # supervisor's next message. Each deadline ``_due`` ever holds now has its timer.
            self._timer.tell_at((*self._key, seq), due, self._ref, REPORTS_DUE)

    def end_alone(self, now: ReportsDue) -> RunFinished | None:
        """The wake-up ``now``'s one report taken, when it is a run's end alone in line where
        groups do not linger (memory): what ``hand`` would hand to ``one`` with
        ``more=False``, nothing before or behind it (``alone.receive`` decides it straight).
        Else None, nothing taken but the wake-up let go as ``hand`` lets it go (it reads
        ``later`` after: ``put``), so ``hand`` takes the line as before."""
        on_way = self._on_way
        if on_way.get(0) is now:
            del on_way[0]
        reports = self._reports
        if not self._alone or len(reports) != 1:
            return None
        seq, report = reports[0]
        if type(report) is not RunFinished or (seq > now.upto and seq not in now.later):
            return None
        reports.popleft()  # (only the supervisor's thread takes)
        return report

    def hand(self, batch: Callable[..., None], one: Callable[..., None], now: Any) -> Any:
        """The reports in line, in order, to the supervisor's handling (on its thread), into
        its open group: ``batch(messages, more=True)`` for a ``Batch``, else
        ``one(message, more=True)``; but the messages of consecutive reports that only
        record what happened (``RECORDS_ONLY``) go together, up to ``RECORDS_MOST`` at a
        time, as ``batch(Records(messages), more=True)`` (one decision: ``SupervisorCore.
        recorded``). ``now``: the message it is about to handle, after them; what it is to
        handle instead: ``now`` itself, or for a ``ReportsDue`` (which takes only what was
        put up to it) ``COMMIT_DUE`` when its open group is to commit by the supervisor's
        rule for a group whose last report came in (its inbox is empty and the group may
        not linger), else ``NOTHING``. Where groups do not linger (memory), a wake-up's last
        report, with nothing behind it in line, goes with ``more=False``, as it went told
        alone before the line: decided by the same rule, and a run's end that comes alone
        decided straight (``actors/alone.py``; through the line, every trivial run's end
        went through a group: ~16 of the supervisor's calls per run more,
        ``benchmarks/spawn.py``'s ``work_by_role``). With SQLite, as since its line came."""
        upto = math.inf
        if type(now) is ReportsDue:
            on_way = self._on_way
            if on_way.get(0) is now:  # taken: a report put from now on is told anew (puts
                del on_way[0]  # never replace one: only this thread takes it out)
            upto = now.upto if not now.later else max(now.upto, *now.later)  # (read after)
        reports = self._reports
        records: list[Any] = []
        while reports and reports[0][0] <= upto:
            report = reports.popleft()[1]  # (only the supervisor's thread takes)
            messages = report.messages if type(report) is Batch else (report,)
            if _records_only(messages):
                records += messages
                if len(records) >= RECORDS_MOST:
                    batch(Records(records), more=True)
                    records = []
                continue
            if records:  # (they came before it)
                batch(Records(records), more=True)
                records = []
            more = bool(reports) or type(now) is not ReportsDue or not self._alone
            if type(report) is Batch:
                batch(messages, more=more)
            else:
                one(report, more=more)
        if records:
            batch(Records(records), more=True)
        if type(now) is not ReportsDue:
            return now
        supervisor = self._supervisor  # its rule for a group whose last report came in:
        if (  # committed when its inbox runs dry, unless it may linger (``GroupLinger``)
            supervisor._group is not None
            and supervisor.actor_inbox.empty()
            and not supervisor.linger.defer(supervisor._held)
        ):
            return COMMIT_DUE
        return NOTHING


class Records(tuple[Any, ...]):
    """Consecutive reports of the line that only record what happened (their messages, in
    order), for the supervisor to decide as one (``LateReports.hand``)."""

    __slots__ = ()


def _records_only(messages: tuple[Any, ...]) -> bool:
    """Whether every one of ``messages`` only records what happened (``RECORDS_ONLY``)."""
    for message in messages:  # noqa: SIM110 (``all`` of a generator: slower, per report)
        if type(message) not in RECORDS_ONLY:
            return False
    return True


def late_reports(supervisor: Any, timer: TimerService) -> LateReports:
    """The ``supervisor``'s late reports. Its agents put theirs there (``MailDesk.late``)
    where senders record their mail and groups linger, and where the supervisor records it
    after (a store that keeps nothing past the process: ``GroupLinger.reports_delay``);
    elsewhere (mail goes through the supervisor, PostgreSQL's way) nobody puts any."""
    late = LateReports(timer, supervisor)
    desk = getattr(supervisor.effector, "mail", None)  # (none: its runs are hosted elsewhere)
    if desk is not None and late.delay > 0 and (desk.record is not None or supervisor.linger.after):
        desk.late = late
    return late


class GroupLinger:
    """Whether the open group may wait, and the timer that ends its wait."""

    __slots__ = ("_begun", "_due", "_key", "_ref", "_timer", "after", "delay", "reports_delay")

    def __init__(self, timer: TimerService, ref: pykka.ActorRef[Any], store: RunStore) -> None:
        """Groups linger only on a store whose senders record their own mail (SQLite:
        ``RunStore.mail_recording``): elsewhere the mail itself goes through the supervisor,
        and an in-memory commit costs nothing to save."""
        self._timer = timer
        self._ref = ref
        self._key = ("group linger", id(self))
        """Its timer's key: a tuple, so the timer service counts these apart
        (``TimerService.scheduled_kinds``)."""
        recording = store.mail_recording()
        self.delay = LINGER_S if recording is MailRecording.SENDER else 0.0
        self.after = recording is MailRecording.SUPERVISOR
        """The supervisor records straight mail after it was delivered (MemoryStore: nothing
        outlives the process): the agents' reports go in line too (``late_reports``), though
        its groups commit at once. Why: an in-memory ping-pong's each mail woke the
        supervisor for its record alone (a ``Journal`` and a ``MailPosted``: ~157 of the 312
        calls per mail were the supervisor's, most of them per message and per decision);
        in line, a few milliseconds of them are one wake-up and one decision."""
        self.reports_delay = LINGER_S if recording is not MailRecording.NONE else 0.0
        """How long a report that only records may wait in line (``LateReports.delay``)."""
        self._due = 0.0
        self._begun: Callable[[], bool] | None = getattr(store, "batch_begun", None)
        """Whether the open group holds the store's write lock already (SQLite: a read or a
        direct write in it began its transaction): such a group commits at once."""

    def defer(self, held: Sequence[Effect]) -> bool:
        """True when the group holding ``held`` may commit later (a ``COMMIT_DUE`` is then
        on its way, within ``delay``); False: commit it now."""
        if self.delay <= 0 or (self._begun is not None and self._begun()):
            return False
        for effect in held:
            if type(effect) is not Publish:
                return False
        now = time.monotonic()
        if self._due < now:  # none on its way (a due one already told commits this too)
            self._due = now + self.delay
            self._timer.tell_at(self._key, self._due, self._ref, COMMIT_DUE)
        return True
