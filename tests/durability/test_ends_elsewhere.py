"""A run held live here that another writer ends, and that this runtime does not save again,
is let go here too, at the command poll (``actors.ends_elsewhere``): its caller told the end
the store keeps, its slot freed (the run queued behind it starts), its agent stopped before
its next step.

Every store: memory (the program's own handle on it), SQLite (a second connection to the
file, as `subagents stop` from another process has), PostgreSQL (a second connection:
tests/pgserver.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import two_handles
from subagents import FunctionAgent, Runtime
from subagents.behaviour.function import AgentContext
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.store.base import RunStore

WAIT = 60.0
POLL_S = 0.05


stores = two_handles.stores


def _stored(store: RunStore, run_id: str, status: RunStatus) -> RunRecord:
    deadline = time.monotonic() + WAIT
    while (record := store.get_run(run_id)) is None or record.status is not status:
        assert time.monotonic() < deadline, f"{run_id} {status}: {record}"
        time.sleep(0.02)
    return record


def test_a_run_waiting_for_mail_ended_elsewhere_is_let_go(
    stores: tuple[RunStore, RunStore],
) -> None:
    """A run waiting for mail that never comes (saved waiting, then ended by another writer,
    never saved again here): its caller is told the end the store keeps, and its record and
    events keep that end alone (no second end, nothing live after it)."""
    store, other = stores

    async def waits(ctx: AgentContext) -> str:
        await ctx.receive(timeout=3 * WAIT)
        return "read"

    agents = [FunctionAgent.create("waits", waits)]
    with Runtime(agents, store=store, command_poll_s=POLL_S) as rt:
        run = rt.spawn("waits", "w")
        two_handles.end_elsewhere(other, _stored(store, run.run_id, RunStatus.WAITING))
        told = run.result(timeout=WAIT)  # (before: until the close)
        assert rt.status(run.run_id).status is RunStatus.CANCELLED
    assert (told.status, told.error) == (RunStatus.CANCELLED, "elsewhere"), told
    record = store.get_run(run.run_id)
    assert record is not None and record.outcome is not None
    assert record.outcome.error == "elsewhere", record
    kinds = [e.kind for e in store.events(run.run_id)]
    assert kinds[-1] is EventKind.WAITING and EventKind.CANCELLED not in kinds, kinds


def test_a_busy_run_ended_elsewhere_frees_its_slot_and_stops_before_its_next_step(
    stores: tuple[RunStore, RunStore],
) -> None:
    """One slot for the agent (``per_agent=1``): the first run works in its own code (a
    thread held: no save, no wait to park at), the second queues behind it. Another writer
    ends the first: its slot is freed here (the second starts and completes while the first
    still works) and, let go on, the first does not get past its next await: its next step
    (here, what it would do after a ``ctx.sleep``: a tool call) never runs, though a live
    run of the same code does it (``witness``)."""
    store, other = stores
    gate, went_on, witness = threading.Event(), threading.Event(), threading.Event()

    async def lead(ctx: AgentContext) -> str:
        if ctx.task == "second":
            return "second"
        assert gate.wait(WAIT)
        await ctx.sleep(0)
        (went_on if ctx.task == "first" else witness).set()  # its next tool call
        return ctx.task

    agents = [FunctionAgent.create("lead", lead)]
    try:
        limits = {"per_agent": 2, "max_concurrency": 2}
        with Runtime(agents, store=store, command_poll_s=POLL_S, limits=limits) as rt:
            first = rt.spawn("lead", "first")
            live = rt.spawn("lead", "live")
            started = _stored(store, first.run_id, RunStatus.RUNNING)
            second = rt.spawn("lead", "second")  # (queued: both slots held)
            two_handles.end_elsewhere(other, started)
            done = second.result(timeout=WAIT)  # the first's slot was freed
            told = first.result(timeout=WAIT)
            gate.set()
            assert live.result(timeout=WAIT).result == "live"
            assert witness.is_set()
            assert not went_on.wait(0.5), "the run ended elsewhere took its next step"
    finally:
        gate.set()
    assert done.status is RunStatus.COMPLETED and done.result == "second", done
    assert (told.status, told.error) == (RunStatus.CANCELLED, "elsewhere"), told


def test_a_refused_wait_writes_no_waiting_event_after_the_end(
    stores: tuple[RunStore, RunStore],
) -> None:
    """A run ended elsewhere while it works, then waits (no poll: its wait's save is refused,
    ``end_race``): its ``waiting`` event is not written after the store's end, nor shown to
    its subscribers; the end the store keeps is its last word."""
    store, other = stores
    gate = threading.Event()

    async def lead(ctx: AgentContext) -> str:
        assert gate.wait(WAIT)
        await ctx.receive(timeout=3 * WAIT)  # its wait: a live save, refused
        return "read"

    agents = [FunctionAgent.create("lead", lead)]
    try:
        with Runtime(agents, store=store, command_poll_s=0) as rt:
            shown: list[Event] = []
            rt.subscribe(shown.append)
            run = rt.spawn("lead", "first")
            two_handles.end_elsewhere(other, _stored(store, run.run_id, RunStatus.RUNNING))
            gate.set()
            told = run.result(timeout=WAIT)
            seen = [e.kind for e in list(shown) if e.run_id == run.run_id]
    finally:
        gate.set()
    assert (told.status, told.error) == (RunStatus.CANCELLED, "elsewhere"), told
    kinds = [e.kind for e in store.events(run.run_id)]
    assert EventKind.WAITING not in kinds, kinds
    assert EventKind.WAITING not in seen, seen


SLEEP_S = 12.0
"""Far longer than the poll's round and poll (~2.5 s): the end is noticed while it sleeps."""


def test_a_function_agent_sleeping_through_an_end_elsewhere_does_not_wake_to_work(
    stores: tuple[RunStore, RunStore],
) -> None:
    """A function agent ended by another writer while in its ``ctx.sleep`` (parked: saved
    waiting) is let go while it sleeps; its sleep's end does not wake it to its next tool
    call (a live run of the same code, the ``witness``, sleeping as long, does wake to it)."""
    store, other = stores
    woke: dict[str, threading.Event] = {"ended": threading.Event(), "witness": threading.Event()}

    async def sleeper(ctx: AgentContext) -> str:
        await ctx.sleep(SLEEP_S)
        woke[ctx.task].set()  # its next tool call
        return "woke"

    agents = [FunctionAgent.create("sleeper", sleeper)]
    with Runtime(agents, store=store, command_poll_s=POLL_S) as rt:
        ended = rt.spawn("sleeper", "ended")
        witness = rt.spawn("sleeper", "witness")
        two_handles.end_elsewhere(other, _stored(store, ended.run_id, RunStatus.WAITING))
        told = ended.result(timeout=WAIT)
        assert not woke["witness"].is_set(), "the end was noticed only after the sleep"
        assert witness.result(timeout=WAIT).result == "woke"
        assert not woke["ended"].wait(0.5), "the run ended elsewhere woke to work"
    assert (told.status, told.error) == (RunStatus.CANCELLED, "elsewhere"), told


def test_a_damaged_record_of_a_held_run_halts_no_look(tmp_path: Path) -> None:
    """A held run's record damaged in the file (a row that does not read as one) is skipped
    by the look, named in the log; the other held run, ended elsewhere, is let go all the
    same, and the runtime goes on (before the skip: the look's read failed, and with it
    the runtime, through its store outage; since SQLite answers the look with ids alone,
    ``ended_among``, no record is decoded here: the skip of a look that reads records is
    tests/runtime/test_ends_look.py's)."""
    from damaged_rows import damage_run
    from subagents.store.sqlite import SQLiteStore

    path = tmp_path / "runs.db"

    async def waits(ctx: AgentContext) -> str:
        await ctx.receive(timeout=3 * WAIT)
        return "read"

    async def quick(ctx: AgentContext) -> str:
        return "quick"

    agents = [FunctionAgent.create("waits", waits), FunctionAgent.create("quick", quick)]
    with (
        SQLiteStore(path) as store,
        SQLiteStore(path) as other,
        Runtime(agents, store=store, command_poll_s=POLL_S) as rt,
    ):
        damaged = rt.spawn("waits", "damaged")
        run = rt.spawn("waits", "ended")
        _stored(store, damaged.run_id, RunStatus.WAITING)
        record = _stored(store, run.run_id, RunStatus.WAITING)
        damage_run(path, damaged.run_id)
        two_handles.end_elsewhere(other, record)
        told = run.result(timeout=WAIT)
        after = rt.run("quick", "after", wait=WAIT)  # (no outage)
    assert (told.status, told.error) == (RunStatus.CANCELLED, "elsewhere"), told
    assert after.status is RunStatus.COMPLETED, after


def test_a_run_finishing_here_as_another_writer_ends_it_ends_once(
    stores: tuple[RunStore, RunStore],
) -> None:
    """The race of the look with the run's own end: each run is ended elsewhere while it
    works, then returns (its completion's save refused, or the poll's look first: the
    returns spread over a poll or two, so both come). Either way it ends once: its caller
    is told the end the store keeps, no end of the runtime's is written, and its slot is
    freed once: afterwards one slot is still one (of two runs spawned, one works and one
    queues; a slot freed twice would start both)."""
    store, other = stores
    tasks = [f"r{i}" for i in range(6)]
    gates = {task: threading.Event() for task in [*tasks, "x1", "x2"]}

    async def lead(ctx: AgentContext) -> str:
        assert gates[ctx.task].wait(WAIT)
        return ctx.task

    agents = [FunctionAgent.create("lead", lead)]
    try:
        limits = {"per_agent": 1, "max_concurrency": 1}
        with Runtime(agents, store=store, command_poll_s=POLL_S, limits=limits) as rt:
            runs = [rt.spawn("lead", task) for task in tasks]
            told = []
            for i, (task, run) in enumerate(zip(tasks, runs, strict=True)):
                two_handles.end_elsewhere(other, _stored(store, run.run_id, RunStatus.RUNNING))
                time.sleep(i * POLL_S / 3)  # (no wait: the returns spread over a poll or two)
                gates[task].set()  # its completion races the poll's look
                told.append(run.result(timeout=WAIT))
            for run in runs:
                assert rt.status(run.run_id).status is RunStatus.CANCELLED
            x1 = rt.spawn("lead", "x1")
            x2 = rt.spawn("lead", "x2")
            _stored(store, x1.run_id, RunStatus.RUNNING)
            assert rt.status(x2.run_id).status is RunStatus.QUEUED, "a slot freed twice"
    finally:
        for gate in gates.values():
            gate.set()
    assert all((t.status, t.error) == (RunStatus.CANCELLED, "elsewhere") for t in told), told
    for run in runs:
        kinds = [e.kind for e in store.events(run.run_id)]
        assert EventKind.COMPLETED not in kinds and EventKind.CANCELLED not in kinds, kinds
