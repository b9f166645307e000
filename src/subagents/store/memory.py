"""MemoryStore: the RunStore protocol held in dictionaries, for runs that need no durability.

Used by embedding programs that want the fastest runtime and by the benchmarks as the
in-memory baseline. Thread-safe: the supervisor writes, anyone may read.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Collection, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, cast

import msgspec

from subagents.messages import (
    ApprovalRecord,
    Checkpoint,
    CheckpointDelta,
    Command,
    Event,
    JournalEntry,
    Lease,
    Mail,
    MailState,
    Outcome,
    Preview,
    RunRecord,
    RunStatus,
    StoredEvent,
    Subscription,
)
from subagents.store.approvals import ApprovalRefused, answer_command, answered, refusal
from subagents.store.base import (
    AlreadyEnded,
    DamagedRow,
    Fenced,
    MailRecording,
    RunStore,
    command_kind,
    fenced_message,
    second_end,
)
from subagents.store.ends_log import EndsLog
from subagents.store.memory_undo import MISSING, roll_back, undo_of
from subagents.store.writes import (
    AppendEvent,
    SaveJournal,
    SaveMails,
    SaveOutcome,
    SaveRun,
    SetMailsState,
    Write,
    apply_writes,
    superseded,
)

_KEPT_DIRECTLY = (
    "save_run",
    "append_event",
    "save_outcome",
    "save_mails",
    "set_mails_state",
    "save_journal",
)
"""The methods whose writes ``MemoryStore._apply_batch`` makes itself, unless overridden."""


class MemoryStore(RunStore):
    """Everything in memory; lost when the process ends (the promises: ``RunStore``)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._batch = cast(AbstractContextManager[None], self._lock)  # (typed once, not per batch)
        self._runs: dict[str, RunRecord] = {}
        self._events: dict[str, list[Event]] = {}
        self._stream: list[Event] = []  # every run's events in the order appended: seq - 1
        self._checkpoints: dict[str, Checkpoint] = {}
        self._mail: dict[str, Mail] = {}
        # mail ids by the runs they concern (sender and recipient), in the order sent: a
        # run's start and end look up its own mail, never every mail ever kept
        self._mail_of_run: dict[str, list[str]] = {}
        self._outcomes: dict[str, tuple[Outcome, bool]] = {}
        self._journals: dict[str, list[JournalEntry]] = {}
        self._subscriptions: dict[tuple[str, str], Subscription] = {}
        """(run, topic) -> its subscription, in the order made (a dict keeps it)."""
        self._commands: list[Command] = []
        self._command_ids = itertools.count(1)
        self._leases: dict[str, Lease] = {}
        self._epochs = itertools.count(1)
        self._approvals: dict[str, ApprovalRecord] = {}
        self._previews: dict[str, Preview] = {}
        self._ends_log = EndsLog()  # (the ends saved through ``save_run``)

    _direct = True
    """Whether ``_apply_batch`` keeps a run's record, events, outcome, mail, mail states
    and journal itself: not in a subclass that overrides one of their methods (a store
    counting or failing its writes: ``__init_subclass__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._direct = all(
            getattr(cls, name) is getattr(MemoryStore, name) for name in _KEPT_DIRECTLY
        )
        cls._batch_is_lock = cls.batch is MemoryStore.batch

    _batch_is_lock = True
    """Whether ``batch`` is the store's lock and nothing more, so that ``_apply_batch`` (which
    takes the lock) may stand for a batch opened around it (``FencedStore.write_batch``):
    not in a subclass that overrides ``batch`` (a store numbering its transactions)."""

    def batch(self) -> AbstractContextManager[None]:
        """The store's lock: nothing else to do, and the supervisor opens one per message
        (a generator context manager cost more than the writes in a mail stream)."""
        return self._batch

    def mail_recording(self) -> MailRecording:
        """The supervisor, after: nothing outlives the process anyway, and a sender's write
        would wait on the supervisor's lock."""
        return MailRecording.SUPERVISOR

    def _apply_batch(self, writes: Sequence[Write], fence: tuple[str, int] | None = None) -> None:
        """A batch's ``writes`` in order, in one call under one hold of the lock
        (``store.writes.write_all``). Why: every decision's writes pass here, and through a method
        each, a write cost two Python calls and a lock of its own (a trivial run makes six: its
        record twice, three events, its outcome); those kinds, and mail, its states and a journal (a
        ping-pong's every mail, their undo taken here, not by ``undo_of``), are kept here directly
        (no hold of the lock again), any other through its method. A subclass that overrides one of
        those methods has every write go through its method (``_direct``): its override is never
        bypassed. Private: ``write_all``'s hook, not a call of the store's public API (whose types
        ``subagents`` exports: the writes are internal to the runtime;
        tests/runtime/test_public_api.py).

        All or nothing, as a batch of SQLite's: should a write raise, those before it are undone and
        the error raised (``store.memory_undo.roll_back``). What undoes them costs the way of every
        run no call: a record, an event or an outcome kept anew is undone by the write itself (its
        key out again, its event popped); only a value a write replaces is kept (``replaced``, by
        the write's place), and any other kind of write takes its undo step before it (``undo_of``).

        ``fence`` (an owner and its epoch): checked first, under the same hold of the lock
        (``FencedStore.write_batch``: the batch, its fence and its writes in this one call, not a
        fenced batch opened and closed around it).

        A run saved twice in the batch is saved twice here, not once at its last save as
        through the methods (``store.writes.superseded``): in a dict the last save is what
        stays either way, and finding the earlier ones walked the batch's writes in Python
        (a fan-out child's step and end, decided together, save it twice: ~4% of its
        supervisor's bytecodes), where a save kept directly is a dict store."""
        runs, outcomes, journals = self._runs, self._outcomes, self._journals
        events, stream = self._events, self._stream
        replaced: dict[int, Any] = {}
        skip: Collection[int] = ()
        i = -1
        with self._lock:
            if fence is not None:  # (nothing written yet: a refusal leaves nothing to undo)
                self.check_fence(*fence)
            try:
                if not self._direct:  # (a subclass's methods see each run saved once)
                    skip = superseded(writes) if len(writes) > 1 else ()
                    for i, write in enumerate(writes):
                        if i not in skip:
                            replaced[i] = undo_of(self, write)
                            apply_writes(self, (write,))
                    return
                for i, write in enumerate(writes):
                    if type(write) is AppendEvent:  # (``_keep_event`` written out: 2 a mail)
                        event = write.event
                        if (kept := events.get(event.run_id)) is None:
                            kept = events[event.run_id] = []
                        kept.append(event)
                        stream.append(event)
                    elif type(write) is SaveRun:
                        record = write.record
                        run_id = record.run_id
                        if run_id in runs:  # (``in``, not ``get``: no call on every run's way)
                            stored = runs[run_id]
                            if stored.status.terminal:  # (kept ended: that end, or refused)
                                _refuse_second_end(stored, record)
                            replaced[i] = stored
                        runs[run_id] = record
                    elif type(write) is SaveOutcome:
                        run_id = write.outcome.run_id  # (an end drops the run's journal)
                        if run_id in outcomes or run_id in journals:
                            old = outcomes.get(run_id, MISSING), journals.get(run_id, MISSING)
                            replaced[i] = old
                        self._keep_outcome(write.outcome, write.delivered)
                    elif type(write) is SaveMails:  # (the mails kept: the last ones in)
                        replaced[i] = len(self._mail)
                        _keep_mails(self._mail, self._mail_of_run, write.mails)  # (no lock again)
                    elif type(write) is SetMailsState:
                        mails = self._mail
                        replaced[i] = [(m, mails[m]) for m in write.mail_ids if m in mails]
                        _set_states(self._mail, write.mail_ids, write.state)
                    elif type(write) is SaveJournal and not write.read_mail:  # (per handling)
                        entries = journals.get(write.run_id)  # (its length now: None, absent)
                        replaced[i] = None if entries is None else len(entries)
                        if entries is None:
                            entries = journals[write.run_id] = []
                        entries += write.entries
                    else:
                        replaced[i] = undo_of(self, write)
                        apply_writes(self, (write,))
            except BaseException:
                roll_back(self, writes, skip, i, replaced)
                raise

    def save_run(self, record: RunRecord) -> None:
        with self._lock:  # (a save over an end, but that end's: refused, ``AlreadyEnded``)
            kept = self._runs.get(record.run_id)
            if kept is not None and kept.status.terminal:
                _refuse_second_end(kept, record)
            self._runs[record.run_id] = record
            self._ends_log.saved(record)

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._lock:
            return self._runs.get(run_id)

    def get_runs(self, run_ids: Collection[str]) -> dict[str, RunRecord]:
        runs = self._runs
        with self._lock:
            return {r: runs[r] for r in run_ids if r in runs}

    def ended_among(self, run_ids: Collection[str]) -> list[str]:
        return [r for r, record in self.get_runs(run_ids).items() if record.status.terminal]

    def ended_by_others(self) -> list[str] | None:
        return self._ends_log.take()  # (the ends saved through ``save_run``: ``EndsLog``)

    def list_runs(
        self,
        *,
        statuses: Iterable[RunStatus] | None = None,
        root_run_id: str | None = None,
        agent: str | None = None,
        limit: int | None = None,
    ) -> list[RunRecord]:
        wanted = set(statuses) if statuses is not None else None
        with self._lock:
            rows = [
                r
                for r in self._runs.values()
                if (wanted is None or r.status in wanted)
                and (root_run_id is None or r.root_run_id == root_run_id)
                and (agent is None or r.agent == agent)
            ]
        rows.sort(key=lambda r: (r.created_at, r.run_id))
        return rows[:limit] if limit is not None else rows

    def append_event(self, event: Event) -> None:
        with self._lock:
            self._keep_event(event)

    def _keep_event(self, event: Event) -> None:
        kept = self._events.get(event.run_id)
        if kept is None:  # (setdefault would make a list for every event)
            self._events[event.run_id] = [event]
        else:
            kept.append(event)
        self._stream.append(event)

    def events(self, run_id: str) -> list[Event]:
        with self._lock:
            return list(self._events.get(run_id, ()))

    def events_after(self, seq: int, *, limit: int = 1000) -> list[StoredEvent]:
        with self._lock:
            start = max(0, seq)
            chosen = self._stream[start : start + max(0, limit)]
        return [StoredEvent(seq=start + i + 1, event=e) for i, e in enumerate(chosen)]

    def last_event_seq(self) -> int:
        with self._lock:
            return len(self._stream)

    def save_preview(self, preview: Preview) -> None:
        with self._lock:
            self._previews[preview.run_id] = preview

    def drop_preview(self, run_id: str) -> None:
        with self._lock:
            self._previews.pop(run_id, None)

    def previews(self, run_ids: Collection[str]) -> dict[str, Preview]:
        with self._lock:
            return {r: p for r in run_ids if (p := self._previews.get(r)) is not None}

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            self._checkpoints[checkpoint.run_id] = checkpoint

    def add_to_checkpoint(self, delta: CheckpointDelta) -> None:
        # a frozen struct replaced, not a file rewritten: cheap enough to apply at once
        with self._lock:
            checkpoint = self._checkpoints.get(delta.run_id)
            if checkpoint is not None:
                self._checkpoints[delta.run_id] = checkpoint.with_delta(delta)

    def load_checkpoint(self, run_id: str) -> Checkpoint | None:
        with self._lock:
            return self._checkpoints.get(run_id)

    def save_mail(self, mail: Mail) -> None:
        self.save_mails((mail,))

    def save_mails(self, mails: Sequence[Mail]) -> None:
        with self._lock:
            _keep_mails(self._mail, self._mail_of_run, mails)

    def set_mail_state(self, mail_id: str, state: MailState) -> None:
        self.set_mails_state((mail_id,), state)

    def set_mails_state(self, mail_ids: Sequence[str], state: MailState) -> None:
        with self._lock:
            _set_states(self._mail, mail_ids, state)

    def mail_for(self, run_id: str, states: Iterable[MailState] | None = None) -> list[Mail]:
        wanted = set(states) if states is not None else None
        with self._lock:
            mails = (self._mail[i] for i in self._mail_of_run.get(run_id, ()))
            return [m for m in mails if wanted is None or m.state in wanted]

    def save_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        with self._lock:
            self._journals.setdefault(run_id, []).extend(entries)

    def journal_of(self, run_id: str) -> list[JournalEntry]:
        with self._lock:
            return list(self._journals.get(run_id, ()))

    def save_subscription(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscriptions.setdefault((subscription.run_id, subscription.topic), subscription)

    def drop_subscriptions(self, run_id: str, topics: Collection[str] | None = None) -> None:
        with self._lock:
            for key in [k for k in self._subscriptions if k[0] == run_id]:
                if topics is None or key[1] in topics:
                    del self._subscriptions[key]

    def subscriptions(self, run_ids: Collection[str] | None = None) -> list[Subscription]:
        wanted = None if run_ids is None else set(run_ids)
        with self._lock:
            subs = list(self._subscriptions.values())
        return [s for s in subs if wanted is None or s.run_id in wanted]

    def save_outcome(self, outcome: Outcome, delivered: bool = False) -> None:
        with self._lock:
            self._keep_outcome(outcome, delivered)

    def _keep_outcome(self, outcome: Outcome, delivered: bool) -> None:
        self._outcomes[outcome.run_id] = (outcome, delivered)
        # A finished run is never replayed: its journal (an entry per call) would only
        # grow the process. The SQLite store keeps it until the sweeper cleans the run.
        self._journals.pop(outcome.run_id, None)

    def mark_outcome_delivered(self, run_id: str) -> None:
        with self._lock:
            if run_id in self._outcomes:
                self._outcomes[run_id] = (self._outcomes[run_id][0], True)

    def undelivered_outcomes(self) -> list[Outcome]:
        with self._lock:
            return [o for o, delivered in self._outcomes.values() if not delivered]

    def post_command(self, kind: str, run_id: str, content: str | None = None) -> int:
        kind = command_kind(kind)
        with self._lock:
            command_id = next(self._command_ids)
            self._commands.append(
                Command(command_id=command_id, kind=kind, run_id=run_id, content=content)
            )
            return command_id

    def pending_command_runs(self) -> list[str]:
        with self._lock:
            return list(dict.fromkeys(c.run_id for c in self._commands))

    def take_commands(self, run_ids: Collection[str] | None = None) -> list[Command]:
        with self._lock:
            if run_ids is None:
                taken, self._commands = self._commands, []
            else:
                taken = [c for c in self._commands if c.run_id in run_ids]
                self._commands = [c for c in self._commands if c.run_id not in run_ids]
            return taken

    def save_approval(self, approval: ApprovalRecord) -> None:
        with self._lock:
            kept = self._approvals.setdefault(approval.approval_id, approval)
            if not kept.pending:  # asked again (a restart): its answer is posted again
                self.post_command("approval", kept.run_id, answer_command(kept))

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        with self._lock:
            return self._approvals.get(approval_id)

    def list_approvals(
        self,
        *,
        pending: bool = True,
        root_run_id: str | None = None,
        run_id: str | None = None,
        damaged: list[DamagedRow] | None = None,
    ) -> list[ApprovalRecord]:
        del damaged  # (records kept as objects: none is ever damaged)
        with self._lock:
            rows = [
                a
                for a in self._approvals.values()
                if (root_run_id is None or a.root_run_id == root_run_id)
                and (run_id is None or a.run_id == run_id)
                and (not pending or refusal(a.approval_id, a, self._runs.get(a.run_id)) is None)
            ]
        return sorted(rows, key=lambda a: (a.asked_at, a.approval_id))

    def answer_approval(
        self,
        approval_id: str,
        allow: bool,
        answer: str | None = None,
        remember: str | None = None,
    ) -> ApprovalRecord:
        with self._lock:
            approval = self.get_approval(approval_id)
            run = self._runs.get(approval.run_id) if approval is not None else None
            why = refusal(approval_id, approval, run)
            if why is not None:
                raise ApprovalRefused(why)
            assert approval is not None
            done = answered(approval, allow, answer, remember, time.time())
            self._approvals[approval_id] = done
            self.post_command("approval", done.run_id, answer_command(done))
            return done

    def acquire_lease(self, lease: Lease) -> int:
        with self._lock:
            epoch = next(self._epochs)
            self._leases[lease.owner] = msgspec.structs.replace(lease, epoch=epoch)
            return epoch

    def renew_lease(self, lease: Lease) -> bool:
        with self._lock:
            held = self._leases.get(lease.owner)
            if held is None or held.epoch != lease.epoch:
                return False
            self._leases[lease.owner] = lease
            return True

    def release_lease(self, owner: str, epoch: int | None = None) -> None:
        with self._lock:
            held = self._leases.get(owner)
            if held is not None and (epoch is None or held.epoch == epoch):
                del self._leases[owner]

    def check_fence(self, owner: str, epoch: int) -> None:
        """The batch holds the store's lock: no takeover comes between this and its writes."""
        with self._lock:
            held = self._leases.get(owner)
            if held is None or held.epoch != epoch:
                raise Fenced(fenced_message(owner, epoch, held.epoch if held else None))

    def leases(self) -> list[Lease]:
        with self._lock:
            return list(self._leases.values())

    def close(self) -> None:
        pass


def _keep_mails(kept: dict[str, Mail], of_run: dict[str, list[str]], mails: Sequence[Mail]) -> None:
    """``MemoryStore.save_mails`` with its lock held: each mail kept once, listed under its
    sender and recipient. (``get``, a new list only for a run's first mail: ``setdefault``
    made an empty list for every mail, thrown away.)"""
    for mail in mails:
        mail_id = mail.mail_id
        if mail_id in kept:  # kept once (``RunStore.save_mail``)
            continue
        sender, recipient = mail.sender, mail.recipient
        if (ids := of_run.get(sender)) is None:
            ids = of_run[sender] = []
        ids.append(mail_id)
        if recipient != sender:
            if (ids := of_run.get(recipient)) is None:
                ids = of_run[recipient] = []
            ids.append(mail_id)
        kept[mail_id] = mail


def _set_states(kept: dict[str, Mail], mail_ids: Sequence[str], state: MailState) -> None:
    """``MemoryStore.set_mails_state`` with its lock held."""
    replace = msgspec.structs.replace
    for mail_id in mail_ids:
        mail = kept.get(mail_id)
        if mail is not None:
            kept[mail_id] = replace(mail, state=state)


def _refuse_second_end(kept: RunRecord, record: RunRecord) -> None:
    """``AlreadyEnded`` unless ``record``, saved over ``kept`` (ended), keeps its end (its
    status and end time): saved again with it unchanged, it is no second end; a second end,
    or a live status (the end undone), is refused."""
    if kept.status is not record.status or kept.ended_at != record.ended_at:
        status = record.status
        said = second_end(record.run_id, kept.status.value, status.value, status.terminal)
        raise AlreadyEnded(said, record.run_id)
