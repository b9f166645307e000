"""The answer owed to whoever asked the supervisor for something by a tell, when it cannot
act on it (its handling failed, or the store did): without one, a run would wait on its
tool call until its deadline, and an outside caller on its spawn forever."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from subagents.logs import get_logger
from subagents.messages import (
    ChildDone,
    MailAck,
    Outcome,
    RunStatus,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    StopRequested,
    new_id,
)
from subagents.store.base import RunStore, StoreError
from subagents.store.writes import Write, write_all
from subagents.supervision.closing import failed_unheld
from subagents.supervision.effects import (
    Effect,
    ScheduleRestart,
    StartRun,
    StopAgent,
    Tell,
    TellOutside,
)
from subagents.supervision.runs import RunTable

log = get_logger("subagents.supervisor")


def refusal_of(message: Any, reason: str) -> tuple[str | None, Any] | None:
    """``(run_id, reply)`` refusing ``message`` with ``reason``: ``run_id`` None for the
    outside (a root's spawn); None when nobody waits on ``message``."""
    match message:
        case SpawnRequest(parent_run_id=None, request_id=rid):
            return None, SpawnReply(request_id=rid, error=reason)
        case SpawnRequest(parent_run_id=str(run_id), request_id=rid):
            return run_id, SpawnReply(request_id=rid, error=reason)
        case SendMail(sender=run_id, request_id=rid):
            return run_id, MailAck(request_id=rid, error=reason)
        case StopRequest(requester=str(run_id), request_id=rid):
            return run_id, StopReply(request_id=rid, error=reason)
        case StopRequested(requester=str(run_id), request_id=rid):
            return run_id, StopReply(request_id=rid, error=reason)
        case _:
            return None


def failure_reason(exc: BaseException) -> str:
    """What a run (or the outside) that asked by a tell is told when handling it failed (a
    bug): otherwise it would wait on its tool call until its deadline."""
    return f"the supervisor could not handle this request: {type(exc).__name__}: {exc}"


def answer_told(
    message: Any,
    reason: str,
    tell: Callable[[str, Any], None],
    on_outside: Callable[[Any], None],
    answers: Callable[[str, int], bool],
) -> None:
    """Refuse ``message`` with ``reason`` to whoever waits on it: ``tell(run_id, reply)`` for a
    run, ``on_outside(reply)`` for the outside; nothing when nobody waits, nor when the start
    that asked is over and a later start of its run has begun (``answers``:
    ``RunTable.answers``; the reply would settle that start's call with the same key)."""
    refusal = refusal_of(message, reason)
    if refusal is not None:
        run_id, reply = refusal
        if run_id is None:
            on_outside(reply)
        elif answers(run_id, message.attempt):  # (each message refused carries its start)
            tell(run_id, reply)


def ends_unrecorded(
    effects: Iterable[Any],
    reason: str,
    on_outside: Callable[[Any], None],
    tell: Callable[[str, Any], None],
    store: RunStore | None = None,
    runs: RunTable | None = None,
    apply: Callable[[list[Effect]], None] | None = None,
    handle: Callable[..., Any] | None = None,
) -> None:
    """The runs that ended in ``effects`` whose writes failed (not the store: a bug, e.g.
    in a store's method), each one's waiter told it failed with ``reason``: a root's caller
    (``on_outside``), a child's parent awaiting it (``tell``: else the parent, and so its
    root's caller, waited for ever). The core has forgotten the run, so nothing else would
    ever tell them. First ``store`` records each so, as its waiter is told (``recorded``):
    else the store kept it unfinished, and a restore ran again a run whose caller was told
    it failed. So are the runs the lost decision ended that nobody waits on (a root's
    children, cancelled with it), and their agents are stopped (``apply``: their
    ``StopAgent``, lost with the effects): else they ran on, their reports dropped, and the
    store kept them unfinished though the core (``runs``: not live) had ended them. And a
    run the lost decision started (a queued one given the slot a run's end freed), or was
    to start again after a delay (a retry: its timer, ``ScheduleRestart``, lost), which the
    core holds running though no agent was started, its deadline never armed, is stopped
    (``handle``: a ``StopRequest`` from the outside, decided and carried out as any), its
    waiter told why: else it waited for ever, its slot never given back.

    Told only what is written: the tells go through ``apply`` (the supervisor's
    ``_apply``) as effects, held until the open group that records the runs failed is
    committed. Told at once, a commit that then failed (or a process that died before it)
    left a caller told "recorded failed" of a run the store kept unfinished, which a restore
    runs again; a failed commit halts instead, and the halt tells the roots among them the
    store's failure, which says their end is not recorded yet."""
    ended: list[tuple[TellOutside | Tell, ChildDone]] = [
        (e, e.message)
        for e in effects
        if isinstance(e, TellOutside | Tell) and isinstance(e.message, ChildDone)
    ]
    stops: list[Effect] = [  # (not a parent stopped to go again: live)
        e for e in effects if isinstance(e, StopAgent) and runs and runs.live(e.run_id) is None
    ]
    starts = [  # (held live, with no agent: the start was lost)
        run_id
        for e in effects
        if isinstance(e, StartRun | ScheduleRestart)
        and runs
        and runs.live(run_id := e.record.run_id if isinstance(e, StartRun) else e.run_id)
    ]
    if handle is not None:
        for run_id in starts:
            _stop_lost_start(handle, run_id, reason)
    if not ended and not stops:
        return
    ids = [done.outcome.run_id for _effect, done in ended]
    ids += [e.run_id for e in stops if isinstance(e, StopAgent)]
    written = store is not None and recorded(store, list(dict.fromkeys(ids)), reason + RECORDED)
    tells: list[Effect] = []
    for effect, done in ended:
        outcome = Outcome(
            run_id=done.outcome.run_id,
            status=RunStatus.FAILED,
            error_kind="supervisor",
            error=reason + (RECORDED if written else UNWRITTEN),
        )
        told = ChildDone(request_id=done.request_id, outcome=outcome)
        tells.append(Tell(effect.run_id, told) if isinstance(effect, Tell) else TellOutside(told))
    if apply is not None:  # held, as any effect, until the open group is committed
        apply([*stops, *tells])
        return
    for told_effect in tells:
        if isinstance(told_effect, Tell):
            tell(told_effect.run_id, told_effect.message)
        elif isinstance(told_effect, TellOutside):
            on_outside(told_effect.message)


def _stop_lost_start(handle: Callable[..., Any], run_id: str, reason: str) -> None:
    """Stop ``run_id``, whose start was lost with its decision's effects (``handle``: the
    supervisor's, which decides and carries out a message)."""
    why = f"its start was lost: {reason}"
    try:
        handle(StopRequest(request_id=new_id("stop"), run_id=run_id, reason=why), asked=False)
    except Exception:  # (the same bug again: it stays as the core has it; the store: halted)
        log.exception("a run whose start was lost could not be stopped", run_id=run_id)


def recorded(store: RunStore, run_ids: Sequence[str], error: str) -> bool:
    """Each of ``run_ids`` recorded failed with ``error`` (its record, outcome and event),
    whatever the store kept of the decision whose writes failed (a store that does not
    roll a failed batch back may have kept part of it); whether it could be written."""
    try:
        ts = time.time()
        writes: list[Write] = []
        for run_id in run_ids:
            record = store.get_run(run_id)
            # (none: the run's spawn was lost with it too; an end the store kept stays, and a
            # second one would be refused with the others' writes: ``AlreadyEnded``)
            if record is not None and not record.status.terminal:
                writes += failed_unheld(record, error, ts, error_kind="supervisor")
        write_all(store, writes)
    except Exception:  # (the same bug again): the run stays as the store has it
        log.exception("runs whose end could not be written could not be recorded failed")
        return False
    return True


UNWRITTEN = (
    " (the run's end could not be written: the store keeps the run unfinished, and a restore"
    " runs it again)"
)
"""What a caller told of a bug in writing its run's end is told besides, when recording it
failed did not work either."""

RECORDED = " (the run's end could not be written: it is recorded failed instead)"
"""What a caller told of a bug in writing its run's end is told besides: the store says
what the caller is told."""


def write_failed(
    exc: Exception,
    effects: Sequence[Any],
    halt: Callable[[Exception, Sequence[Any]], None],
    on_outside: Callable[[Any], None],
    tell: Callable[[str, Any], None],
    store: RunStore | None = None,
    runs: RunTable | None = None,
    apply: Callable[[list[Effect]], None] | None = None,
    handle: Callable[..., Any] | None = None,
) -> None:
    """A decision's writes failed with ``exc``: its ``effects`` are lost, but a run that
    ended in them is no longer among the core's runs, so its caller (a root's, or an
    awaiting parent) is told here or never: the store failed (``halt``:
    ``SupervisorActor._halt``, which tells the roots' with the rest, and stops every run),
    or a bug did (``ends_unrecorded``, recorded in ``store`` as told: the supervisor goes
    on)."""
    if isinstance(exc, StoreError):
        halt(exc, effects)
    else:
        reason = failure_reason(exc)
        ends_unrecorded(effects, reason, on_outside, tell, store, runs, apply, handle)


def rolled_back(group: AbstractContextManager[None] | None, exc: Exception) -> None:
    """The supervisor's open store ``group`` exited with ``exc`` (rolled back), if any; not
    dropped open: a MemoryStore's group holds the store's lock, which the supervisor's
    thread would keep, and a close (``release_lease``) would wait on it for ever."""
    if group is not None:
        with contextlib.suppress(Exception):  # (the store failed: its rollback may too)
            group.__exit__(type(exc), exc, None)
