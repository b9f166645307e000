"""The commands other processes post through the store, acted on in one decision.

Why apart from the core: what ``subagents stop``/``send`` and an answer given in the store
come to is one concern, and the stops among them must be decided together. ``subagents stop
--all`` (or ``--requester``) posts a stop per run, and one poll takes them all: stopped one
walk at a time, each walk handed the slots it freed to the queue before the next stop was
handled, so a queued run of a tree stopped next was started, or a parked one let go on, only
to be stopped (``Lifecycle._cancel_walk``). Consecutive stops are one walk
(``Lifecycle.cancel_each``); a send or an answer between them keeps its place in the order
the commands were posted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from subagents.messages import EXTERNAL_SENDER, Command, SendMail, new_id
from subagents.supervision import approvals
from subagents.supervision.effects import Decided
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.runs import RunTable

STOPPED = "stopped from another process"
"""A run's error when a stop command ended it."""


def commanded(
    commands: Sequence[Command],
    runs: RunTable,
    life: Lifecycle,
    mail: MailRoom,
    now: Callable[[], float],
) -> Decided:
    """What ``commands`` come to, in the order they were posted: each run of consecutive
    stops one cancel walk, each mail sent from the outside, each answer told to its run
    (``approvals.answered``). A command for a run not live here does nothing."""
    decided = Decided()
    stops: list[Command] = []
    for command in commands:
        if command.kind == "stop":
            stops.append(command)
            continue
        decided.add(_stopped(stops, runs, life))
        stops = []
        if command.kind == "send" and command.content is not None:
            sent = SendMail(
                request_id=new_id("q", now()),
                sender=EXTERNAL_SENDER,
                to=command.run_id,
                content=command.content,
            )
            decided.add(mail.send((sent,))[1])
        elif command.kind == "approval" and command.content is not None:
            decided.add(approvals.answered(runs, command, now()))
    return decided.add(_stopped(stops, runs, life))


def _stopped(stops: Sequence[Command], runs: RunTable, life: Lifecycle) -> Decided:
    """The runs of ``stops`` that are live here, cancelled in one walk: of their turn
    (``--turn``: detached children go on) when every stop of that run says so."""
    tops = {c.run_id: state for c in stops if (state := runs.live(c.run_id)) is not None}
    if not tops:
        return Decided()
    trees = {c.run_id for c in stops if c.content != "turn"}
    turns = {c.run_id for c in stops if c.content == "turn"} - trees
    return life.cancel_each(list(tops.values()), STOPPED, turns)[1]
