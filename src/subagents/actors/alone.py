"""A root spawn, or a run's end, that reaches the supervisor alone: decided straight.

Why: most runs are spawned one at a time (``Runtime.run``, ``spawn``) and end one at a time,
and each such message used to pass through the layers made for many: a root spawn through
``spawn_group.decide_together`` (a look into the inbox for the spawns queued behind it, then
the ask's handling: ``_asked``, ``_handle``, the deciders' table) and a run's end through a
store group opened, deferred and committed around its one decision (``_in_group``,
``GroupLinger.defer``, ``_commit_group``). Alone (nothing queued behind it, no group open,
no rest of a ``Batch`` to come), either is exactly that group of one: the same decision, its
writes in one transaction (the one ``store.writes.write_all`` opens), then its effects, and
the same answers when it fails; ~25 of the supervisor's calls per trivial run less
(``benchmarks/spawn.py``'s ``work_by_role``).

A run's end is the one report taken so: its decision tells its requester (a ``Tell`` or a
``TellOutside``), so ``GroupLinger.defer`` would have committed its group at once; a report
that only publishes (a step taken) may linger for the reports behind it, and still goes
through the group. But an LLM run's last step comes in one ``Batch`` with its end (told:
``AgentActor.report_step`` with ``wait`` False, then ``_end``), and that end commits the
group at once too: the pair is one decision (``last_steps``), straight when alone: ~50 of
the supervisor's calls per lone LLM run less, ~25 per fan-out child (in a group)
(``benchmarks/_llm_spec_work.py``, ``benchmarks/fanout.py``'s child).
"""

from __future__ import annotations

from typing import Any

import pykka

from subagents.actors.deadlines import DEADLINES_DUE
from subagents.actors.group_linger import COMMIT_DUE, ReportsDue
from subagents.actors.inbox import PYKKA_MESSAGES
from subagents.actors.spawn_group import groupable
from subagents.actors.step_tail import TAIL_DUE
from subagents.messages import RunFinished, SpawnRequest, SpawnsDecided, StepTaken
from subagents.store.base import StoreError
from subagents.supervision.coalesce import coalesce
from subagents.supervision.effects import Decision, join

SupervisorActor = Any
"""The ``actor`` each function is handed and works on as its own methods would (the
``SupervisorActor``, which imports this module: named, not imported)."""


STRAIGHT = frozenset({RunFinished, SpawnRequest})
"""The types of the messages that may be decided straight (``straight`` tells which)."""


def straight(actor: SupervisorActor, message: RunFinished | SpawnRequest) -> bool:
    """Decide ``message`` (told, the last of its ``Batch``, of a type in ``STRAIGHT``)
    straight when it is alone: no group open, nothing queued behind it, and a run's end or a
    root's spawn (not a continuation: it is asked). False: nothing done, the caller handles
    it as before (the supervisor checked the store works: ``SupervisorActor._receive``)."""
    if actor._group is not None or not actor.actor_inbox.empty():
        return False
    if type(message) is RunFinished:
        finished_alone(actor, message)
        return True
    if groupable(message):
        root_spawn_alone(actor, message)
        return True
    return False


def receive(actor: SupervisorActor, message: Any) -> Any:
    """The supervisor's handling of each message pykka hands it (``_handle_receive``).

    A root spawn or a run's end that finds the supervisor with nothing else on hand (no
    reports in the late line, no settling report held, the store working, no group open,
    nothing queued behind it) is decided straight here: what ``on_receive``,
    ``LateReports.hand``, ``_receive``, ``SettleLine.hold`` and ``straight`` would each have
    found (nothing to do) is read once, without their five calls per message. A run's end
    comes so as the one report of its wake-up (``ReportsDue``) where the agents' reports go
    through the line (``LateReports.end_alone``: where groups do not linger): taken there
    and decided straight, without ``on_receive``'s hand of the line, ``_receive`` and the
    empty ``Batch`` left after (~10 of the supervisor's calls per run less). Any other
    message goes as ``FastInboxActor._handle_receive`` takes it (pykka's own, or
    ``on_receive``), one set lookup more; the deadline tick (``actors/deadlines``) first
    moves the deadlines kept into the line and tells those due, then goes on as any timer's
    message does (a ``COMMIT_DUE``: the late line taken, the open group committed)."""
    if actor.tail._held and (message is not DEADLINES_DUE or actor.late._reports):
        actor.tail.take()  # a step's rest held (``actors.step_tail``): before anything else
    if message is DEADLINES_DUE or message is TAIL_DUE:
        if message is DEADLINES_DUE:
            actor.effector.deadlines.due()
        return actor.on_receive(COMMIT_DUE)
    kind = type(message)
    if (
        (kind is RunFinished or kind is SpawnRequest)
        and actor._group is None
        and not actor.late._reports  # (``LateReports.hand``: nothing in line first)
        and not actor.settling.held  # (``SettleLine.hold``: nothing to decide first)
        and actor.outage.failure is None
        and actor.actor_inbox.empty()
    ):
        if kind is RunFinished:
            finished_alone(actor, message)
            return None
        if message.continues is None and message.parent_run_id is None:  # (``groupable``)
            root_spawn_alone(actor, message)
            return None
    if (  # a run's end, alone in the line of reports (``LateReports.end_alone``)
        kind is ReportsDue
        and actor.late._alone  # (groups do not linger: memory)
        and actor._group is None
        and not actor.settling.held
        and actor.outage.failure is None
        and actor.actor_inbox.empty()
    ):
        end = actor.late.end_alone(message)
        if end is not None:
            finished_alone(actor, end)
            return None
    if kind in PYKKA_MESSAGES:
        return pykka.Actor._handle_receive(actor, message)
    return actor.on_receive(message)


def root_spawn_alone(actor: SupervisorActor, message: SpawnRequest) -> None:
    """A root spawn told with nothing queued behind it: ``SupervisorActor._root_spawns``'s
    group of one, decided straight by the core's ``spawn``; its failure refuses it as that
    group's would (``_told_spawns``: the store's error after a halt, else a bug logged)."""
    try:
        try:
            actor._carry_out(actor.core.spawn(message))
        except StoreError as exc:  # halted before anything else is handled
            actor._halt(exc)
            raise
    except BaseException as exc:
        actor._told_spawns([message], exc)
        if not isinstance(exc, Exception):
            raise
        return
    actor.on_outside(SpawnsDecided(request_ids=(message.request_id,)))


def finished_alone(actor: SupervisorActor, message: RunFinished) -> None:
    """A run's end alone: decided (``deciders``' ``finished``: the effector forgets the run
    first), its writes in their own transaction, its effects after as a group's are (one
    ``Batch`` per run: ``coalesce``); failing, as in a group: a store error halts, a bug is
    logged and its sender hears of it."""
    try:
        decision = actor._deciders[RunFinished](message)
        assert decision is not None  # (``finished`` always decides)
        actor._write(decision)
    except StoreError as exc:
        actor._halt(exc)
        return
    except Exception as exc:
        actor._told_failed((message,), exc)
        return
    actor._apply(coalesce(decision.effects))


def last_steps(actor: SupervisorActor, messages: tuple[Any, ...], more: bool) -> bool:
    """A ``Batch`` that is a run's last step and its end (``AgentActor.report_step`` told,
    then ``_end``): decided as one (``last_step_decision``); ``more`` as
    ``SupervisorActor._receive_batch``'s. Alone (nothing more, no group open, nothing queued
    behind it) straight, as the group of the two would be: their writes in one transaction
    (the one ``write_all`` opens), then their effects (one ``Batch`` per run: ``coalesce``);
    a store error halts, a write that breaks (a bug) answers both. Else in the open group
    (``_in_group``, which decides such a pair so). False: not such a pair, nothing done."""
    if len(messages) != 2 or type(messages[0]) is not StepTaken:
        return False
    step, end = messages
    if type(end) is not RunFinished:
        return False
    if more or actor._group is not None or not actor.actor_inbox.empty():
        actor._in_group(messages, more=more)
        return True
    try:
        decision = last_step_decision(actor, step, end)
        actor._write(decision)
    except StoreError as exc:
        actor._halt(exc)
        return True
    except Exception as exc:
        actor._told_failed(messages, exc)
        return True
    actor._apply(coalesce(decision.effects))
    return True


def last_step_decision(actor: SupervisorActor, step: StepTaken, end: RunFinished) -> Decision:
    """One decision on a run's last step and its end (one ``Batch``'s pair, alone or in a
    group: ``SupervisorActor._in_group``): the step's, then the end's (``deciders``'
    ``finished``: the effector forgets the run first), as two messages in one group would be
    decided, with one write of both and one carrying out, not one each. A part whose
    decision fails (a bug) is logged and its sender answered, as in a group, and the other
    is decided all the same."""
    decide = actor._deciders
    try:
        decision: Decision = decide[StepTaken](step)
    except StoreError:
        raise  # the store's own failure halts, as in ``_in_group``; not a bug to log
    except Exception as exc:
        actor._told_failed((step,), exc)
        decision = Decision(None, [], [])
    try:
        ended = decide[RunFinished](end)
    except StoreError:
        raise
    except Exception as exc:
        actor._told_failed((end,), exc)
    else:
        join(decision.writes, ended.writes)
        decision.effects += ended.effects
    return decision
