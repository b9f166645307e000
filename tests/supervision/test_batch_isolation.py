"""The core's batch decisions isolate each item (``supervision/isolated.py``): an item whose
handling raises (a bug) is answered alone, with the error naming it, and the others are
decided, written and answered as usual. Before, the exception lost the whole decision:
the writes and answers of the items before it too, whose memory had already changed (the
core said a run ended, the store kept it running, and its caller was never told).

The bugs are injected through what the core is given (a wall clock that breaks once, a
``read_run`` that raises for one run, a malformed receipt); no part of the core is mocked.
Without threads: the core alone, its writes carried out on a store as the actor does. The
promise checked after each decision: every caller told once, the store's state what it was
told, and the store's unfinished runs the core's live ones."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    EXTERNAL_SENDER,
    ChildDone,
    MailRead,
    MailState,
    RunRecord,
    RunStatus,
    SendMail,
    SpawnRequest,
    StopRequest,
    StopRequested,
    new_id,
)
from subagents.store.memory import MemoryStore
from subagents.supervision.core import SupervisorCore
from subagents.supervision.effects import Decision, StartRun, TellOutside
from subagents.supervision.limits import Limits

from .test_core import Driven

SPECS = {n: AgentSpec(name=n, description=f"the {n}") for n in ("lead", "worker")}


class BreakingClock:
    """A wall clock that raises once, at the ``at``-th reading after ``arm``: a bug at
    some point of the handling of one item of a batch, wherever that point is."""

    def __init__(self) -> None:
        self.t = 1_000.0
        self.left: int | None = None
        self.broke = False

    def arm(self, at: int) -> None:
        self.left, self.broke = at, False

    def __call__(self) -> float:
        if self.left is not None:
            self.left -= 1
            if self.left == 0:
                self.left, self.broke = None, True
                raise RuntimeError("the clock broke")
        self.t += 0.001
        return self.t


def _driven(
    read_run: Callable[[MemoryStore], Callable[[str], RunRecord | None]] = lambda s: s.get_run,
) -> tuple[Driven, MemoryStore, BreakingClock]:
    store, clock = MemoryStore(), BreakingClock()
    core = SupervisorCore(
        lookup=SPECS.get,
        names=lambda: list(SPECS),
        read_run=read_run(store),
        limits=Limits(max_concurrency=20, max_children=10, queue_bound=100),
        clock=lambda: 1000.0,
        now=clock,
    )
    return Driven(core, store), store, clock


def _trees(driven: Driven, roots: int = 3) -> list[str]:
    """``roots`` roots, each with a child: the roots' ids."""
    return [root for root, _child in _pairs(driven, roots)]


def _pairs(driven: Driven, roots: int) -> list[tuple[str, str]]:
    """``roots`` roots, each with a child: their ids."""
    ids = []
    for _ in range(roots):
        reply, _effects = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
        assert reply.run_id is not None
        child = SpawnRequest(
            request_id=new_id("q"), agent="worker", task="c", parent_run_id=reply.run_id
        )
        child_id = driven.spawn(child)[0].run_id
        assert child_id is not None
        ids.append((reply.run_id, child_id))
    return ids


def _kept_as_told(driven: Driven, store: MemoryStore, roots: Sequence[str], d: Decision) -> None:
    """Each root's caller told its end at most once, and the store says what it was told;
    the store's unfinished runs are the core's live ones (memory never ahead of it)."""
    told: dict[str, list[ChildDone]] = {}
    for effect in d.effects:
        if isinstance(effect, TellOutside) and isinstance(effect.message, ChildDone):
            told.setdefault(effect.message.outcome.run_id, []).append(effect.message)
    for root in roots:
        record = store.get_run(root)
        assert record is not None
        dones = told.get(root, [])
        assert len(dones) <= 1, dones
        if dones:
            assert record.status is dones[0].outcome.status
        else:
            assert not record.status.terminal
    live = {s.run_id for s in driven.runs if not s.record.status.terminal}
    unfinished = {r.run_id for r in store.list_runs() if not r.status.terminal}
    assert live == unfinished


def _failed_by_the_bug(store: MemoryStore) -> list[RunRecord]:
    """The runs the store says ended failed with the injected bug, named in their error."""
    return [
        r
        for r in store.list_runs()
        if r.status is RunStatus.FAILED
        and r.outcome is not None
        and r.outcome.error_kind == "supervisor"
        and "could not handle" in (r.outcome.error or "")
        and "the clock broke" in (r.outcome.error or "")
    ]


def test_a_close_ends_every_run_when_one_end_raises() -> None:
    """Wherever the bug strikes in a close (``closing.close_all``), every run still ends,
    each root's caller is told once, and the store says what it was told: the run whose
    end raised ended failed with the error, the others cancelled."""
    struck = 0
    for at in range(1, 16):
        driven, store, clock = _driven()
        roots = _trees(driven)
        clock.arm(at)
        decision = driven._do(driven.core.stop_all("closing"))
        if not clock.broke:
            continue
        struck += 1
        _kept_as_told(driven, store, roots, decision)
        assert all(r.status.terminal for r in store.list_runs())
        told = [e for e in decision.effects if isinstance(e, TellOutside)]
        assert len(told) == len(roots)  # every root's caller, once
        assert len(_failed_by_the_bug(store)) == 1, at
        cancelled = [r for r in store.list_runs() if r.status is RunStatus.CANCELLED]
        assert len(cancelled) == 2 * len(roots) - 1
    assert struck >= 5  # the bug struck inside the close, at several points of it


def test_a_stop_of_every_root_stops_the_others_when_one_raises() -> None:
    """``stop_requested`` (the outside stops every root: one cancel walk): the run whose
    cancel raises ends failed with the error, alone; every other run is cancelled and
    written so, each root's caller told once."""
    struck = 0
    for at in range(1, 16):
        driven, store, clock = _driven()
        roots = _trees(driven)
        clock.arm(at)
        stop = StopRequested(request_id=new_id("s"), requested_by=EXTERNAL_SENDER)
        decision = driven._do(driven.core.stop_requested(stop))
        if not clock.broke:
            continue
        struck += 1
        _kept_as_told(driven, store, roots, decision)
        assert all(r.status.terminal for r in store.list_runs())
        assert len(_failed_by_the_bug(store)) == 1, at
        assert decision.reply.error is None
        # the reply names every run the stop ended, the one ended by the bug too
        assert sorted(decision.reply.stopped) == sorted(r.run_id for r in store.list_runs())
    assert struck >= 5


def test_a_stops_reply_names_the_run_its_walk_ended_by_a_bug() -> None:
    """A ``StopRequest`` of one tree whose cancel walk raises on one of its runs: that run
    ends failed with the error, and the stop's caller is told it ended, as the others."""
    struck = 0
    for at in range(1, 12):
        driven, store, clock = _driven()
        root, child = _pairs(driven, 1)[0]
        clock.arm(at)
        stop = StopRequest(request_id=new_id("s"), run_id=root, reason="enough")
        decision = driven._do(driven.core.stop(stop))
        if not clock.broke:
            continue
        struck += 1
        _kept_as_told(driven, store, [root], decision)
        assert len(_failed_by_the_bug(store)) == 1, at
        assert decision.reply.error is None
        assert sorted(decision.reply.stopped) == sorted([root, child]), at
    assert struck >= 2


def test_a_lost_host_restarts_the_others_when_one_move_raises() -> None:
    """``host_lost``: the run whose move raises ends failed with the error (its caller
    told), the others are started again as usual."""
    struck = 0
    for at in range(1, 10):
        driven, store, clock = _driven()
        roots = _trees(driven)
        clock.arm(at)
        reads = {r: ((), ()) for r in roots}
        decision = driven._do(driven.core.host_lost(roots, "its host died", reads))
        if not clock.broke:
            continue
        struck += 1
        _kept_as_told(driven, store, roots, decision)
        failed = _failed_by_the_bug(store)
        assert len(failed) == 1, at
        started = {e.record.run_id for e in decision.effects if isinstance(e, StartRun)}
        assert started == set(roots) - {failed[0].run_id}
    assert struck >= 2


def test_a_run_of_sends_delivers_the_others_when_one_raises() -> None:
    """``send_mails``: the mail whose routing raises (``read_run`` fails for its recipient)
    is answered alone with the error and not recorded; the mails around it are kept and
    delivered."""

    def read_run(store: MemoryStore) -> Callable[[str], RunRecord | None]:
        def read(run_id: str) -> RunRecord | None:
            if run_id == "r-unreadable":
                raise RuntimeError("the record of r-unreadable cannot be read")
            return store.get_run(run_id)

        return read

    driven, store, _clock = _driven(read_run)
    ((root, other),) = _pairs(driven, 1)
    to = [other, "r-unreadable", other]
    sends = [
        SendMail(request_id=new_id("q"), sender=root, to=t, content=f"m{i}")
        for i, t in enumerate(to)
    ]
    acks, _effects = driven.send_mails(sends)
    assert [a.request_id for a in acks] == [s.request_id for s in sends]
    assert acks[1].error is not None and "could not handle" in acks[1].error
    assert "r-unreadable" in acks[1].error
    assert acks[0].error is None and acks[2].error is None
    kept = store.mail_for(other)
    assert [m.content for m in kept] == ["m0", "m2"]
    assert {m.mail_id for m in kept} == {acks[0].mail_id, acks[2].mail_id}
    held = driven.runs.get(other)
    assert held is not None and set(held.inbox) == {acks[0].mail_id, acks[2].mail_id}


def test_a_run_of_receipts_keeps_the_others_when_one_raises() -> None:
    """``mail_reads``: a malformed receipt (its ids a number, not a sequence: a bug) is left
    out alone; the receipts around it are written."""
    driven, store, _clock = _driven()
    ((root, other),) = _pairs(driven, 1)
    sends = [SendMail(request_id=new_id("q"), sender=root, to=other, content=c) for c in "ab"]
    acks, _effects = driven.send_mails(sends)
    first, second = (a.mail_id for a in acks)
    assert first is not None and second is not None
    bad = MailRead(run_id=other, mail_ids=5)  # type: ignore[arg-type]
    receipts = [
        MailRead(run_id=other, mail_ids=(first,)),
        bad,
        MailRead(run_id=other, mail_ids=(second,)),
    ]
    driven.mail_reads(receipts)
    states = {m.mail_id: m.state.value for m in store.mail_for(other)}
    assert states == {first: "read", second: "read"}
    held = driven.runs.get(other)
    assert held is not None and not held.inbox


def _inboxes_as_stored(driven: Driven, store: MemoryStore) -> None:
    """Memory's inboxes are what the store keeps: every mail a held run's inbox holds is
    recorded, unread; an ended run's unread mail is dead in the store (none left
    delivered to it, nor in its inbox)."""
    for state in driven.runs:
        to_it = (m for m in store.mail_for(state.run_id) if m.recipient == state.run_id)
        stored = {m.mail_id: m for m in to_it}
        for mail_id in state.inbox:
            assert mail_id in stored, (state.run_id, mail_id, "not recorded")
            assert stored[mail_id].state in (MailState.DELIVERED, MailState.ACCEPTED)
        if state.record.status.terminal:
            assert not state.inbox
            unread = [m for m in stored.values() if m.state is MailState.DELIVERED]
            assert not unread, (state.run_id, unread)


def test_a_stopped_background_childs_report_is_its_parents_once_when_its_end_raises() -> None:
    """A background child's end mails its report to its parent (``MailRoom.notify``, into
    the parent's inbox); when the end raises after that, the report is taken out again with
    the end's lost writes (``inbox_ledger``), and the parent holds only the report of the
    end it was recorded with (failed by the bug). Before: it held the lost report too, never
    recorded (memory ahead of the store), two reports of one end."""
    struck = 0
    for at in range(1, 12):
        driven, store, clock = _driven()
        reply, _effects = driven.spawn(SpawnRequest(request_id=new_id("q"), agent="lead", task="t"))
        root = reply.run_id
        assert root is not None
        child = SpawnRequest(
            request_id=new_id("q"), agent="worker", task="c", parent_run_id=root, background=True
        )
        assert driven.spawn(child)[0].run_id is not None
        clock.arm(at)
        stop = StopRequested(request_id=new_id("s"), requested_by=root, requester=root)
        driven._do(driven.core.stop_requested(stop))
        if not clock.broke:
            continue
        struck += 1
        _inboxes_as_stored(driven, store)
        held = driven.runs.get(root)
        assert held is not None and len(held.inbox) == 1, (at, held and held.inbox)
        assert len([m for m in store.mail_for(root) if m.recipient == root]) == 1, at
    assert struck >= 4  # before the report, in it, and after it was put in the inbox


def test_a_stopped_runs_unread_mail_is_dead_when_its_end_raises() -> None:
    """A run stopped with unread mail: its end makes the mail dead and tells its sender
    (``MailRoom.dead_letters``). When the end raises after emptying the inbox, the mail is
    back in it and made dead by the end the run is recorded with (failed by the bug), its
    sender told once. Before: gone from memory, yet delivered and unread in the store for
    ever; the notice to its sender, if made, in the sender's inbox but never recorded."""
    struck = 0
    for at in range(1, 12):
        driven, store, clock = _driven()
        ((root, child),) = _pairs(driven, 1)
        acks, _effects = driven.send_mails(
            [SendMail(request_id=new_id("q"), sender=root, to=child, content="unread")]
        )
        assert acks[0].error is None
        clock.arm(at)
        stop = StopRequested(request_id=new_id("s"), requested_by=root, requester=root)
        driven._do(driven.core.stop_requested(stop))
        if not clock.broke:
            continue
        struck += 1
        _inboxes_as_stored(driven, store)
        (mail,) = [m for m in store.mail_for(child) if m.recipient == child]
        assert mail.state is MailState.DEAD, at
        held = driven.runs.get(root)
        assert held is not None and len(held.inbox) == 1, (at, held and held.inbox)
    assert struck >= 4
