"""The commands other processes post through the store, acted on in one decision.

Why apart from the core: what ``subagents stop``/``send`` and an answer given in the store
come to is one concern, and the stops among them must be decided together. ``subagents stop
--all`` (or ``--requester``) posts a stop per run, and one poll takes them all: stopped one
walk at a time, each walk handed the slots it freed to the queue before the next stop was
handled, so a queued run of a tree stopped next was started, or a parked one let go on, only
to be stopped (``Lifecycle._cancel_walk``). Consecutive stops are one walk
(``Lifecycle.cancel_each``); a send or an answer between them keeps its place in the order
the commands were posted, and the slots the stops free go to the queue only after the last
of them (a stop, a send, a stop: the first stop's slot started a queued run of the second's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set

from subagents.logs import get_logger
from subagents.messages import (
    EXTERNAL_SENDER,
    Command,
    EventKind,
    MailAck,
    RunRecord,
    SendMail,
)
from subagents.messages.durability import command_request_id
from subagents.supervision import approvals
from subagents.supervision.effects import Decided
from subagents.supervision.lifecycle import Lifecycle
from subagents.supervision.mailroom import MailRoom
from subagents.supervision.runs import RunState, RunTable

log = get_logger("subagents.supervisor")

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
    (``approvals.answered``). A command for a run not live here does nothing, but a stop of
    the tree of a run ended here while its tree is held (``_stoppable``)."""
    decided = Decided()
    stops: list[Command] = []
    # Every run stopped in this poll counts as ending until the last stop is decided: a walk
    # before a send hands the queue no slot (``Lifecycle._cancel_walk``), so no queued run of
    # a tree stopped after the send is started only to be stopped; the queue gets them below.
    # (a run ended already is not, but the live runs a stop of its tree reaches are,
    # ``_stoppable``: its detached runs, cancelled, report to its nearest live ancestor)
    trees = {c.run_id for c in commands if c.kind == "stop" and c.content != "turn"}
    stopped = {s.run_id for c in commands if c.kind == "stop" for s in _stoppable(c, runs, trees)}
    held = stopped - life.ending
    life.ending |= held
    try:
        for command in commands:
            if command.kind == "stop":
                stops.append(command)
                continue
            decided.add(_stopped(stops, runs, life, trees))
            stops = []
            if command.kind == "send" and command.content is not None:
                sent = SendMail(  # its request id names the command (`send --wait`)
                    request_id=command_request_id(command.command_id),
                    sender=EXTERNAL_SENDER,
                    to=command.run_id,
                    content=command.content,
                )
                acks, sending = mail.send((sent,))
                decided.add(sending)
                if acks[0].error is not None:
                    _refused(command, acks[0], runs, now(), decided)
            elif command.kind == "approval" and command.content is not None:
                decided.add(approvals.answered(runs, command, now()))
        decided.add(_stopped(stops, runs, life, trees))
    finally:
        life.ending -= held
    if held and life.slots.queue_length() and not life.ending:
        decided.add(life.start_queued())
    return decided


def forgotten_commands(
    pending: Sequence[str],
    read_run: Callable[[str], RunRecord | None],
    owner: str,
    gone: Callable[[RunRecord], bool] = lambda _record: False,
) -> list[str]:
    """Of ``pending`` (runs with commands not taken yet, none held here), those whose
    commands this runtime must take, though it no longer holds them: the runs it hosted
    that have ended, their tree forgotten (a send posted while the run was live, taken
    after its tree ended: the mail becomes a dead letter, as mail to an ended run does;
    a stop finds nothing to stop), and runs the store no longer has (their commands can
    never be carried out: a send is refused and logged, ``_refused``); and ended runs of a
    runtime that is gone (``gone``: its lease is not alive and nothing of the run's tree is
    unfinished: a runtime that closed before it polled, say; no ``resume`` will take
    them). A run hosted by another live runtime, or in a tree an orphan of a gone one is
    still part of (a ``resume`` takes its commands with it), or that has not ended, is left
    to its host. ``read_run``: the store's record (one read per run of ``pending``, made
    only when it has commands pending)."""
    taken: list[str] = []
    for run_id in pending:
        record = read_run(run_id)
        if record is None or (record.status.terminal and (record.owner == owner or gone(record))):
            taken.append(run_id)
    return taken


def _refused(command: Command, ack: MailAck, runs: RunTable, now: float, decided: Decided) -> None:
    """A mail posted from another process that the mail room refused (over this runtime's
    ``Limits.max_text_chars``...) or kept as a dead letter (its run ended after it was
    posted): the process that posted it has exited, and was told it would be delivered. A
    ``mail_refused`` event of the run says what became of it (``subagents log``,
    ``subagents events``), and this runtime's log."""
    log.warning(
        "a mail posted from another process was refused",
        run_id=command.run_id,
        command_id=command.command_id,
        error=ack.error,
    )
    state = runs.get(command.run_id)
    if state is None:  # not held here (a forgotten tree's, gone from the store): logged only
        return
    data = {"command_id": command.command_id, "sender": EXTERNAL_SENDER, "error": ack.error}
    if ack.dead_letter:
        data["mail_id"] = ack.mail_id
    decided.event(EventKind.MAIL_REFUSED, state.record, now, data)


def _stopped(stops: Sequence[Command], runs: RunTable, life: Lifecycle, trees: Set[str]) -> Decided:
    """The runs of ``stops`` that are live here, cancelled in one walk: of their turn
    (``--turn``: detached children go on) unless a stop of the poll stops that run's tree
    (``trees``: it wins, wherever it was posted; after a send, it would find the run
    ended by its turn stop, and its detached children running)."""
    tops: dict[str, RunState] = {}
    by_tree: set[str] = set()  # reached by a tree stop: ended with their trees, whatever else
    for stop in stops:
        for state in _stoppable(stop, runs, trees):
            tops.setdefault(state.run_id, state)
            if stop.run_id in trees:
                by_tree.add(state.run_id)
    if not tops:
        return Decided()
    turns = {c.run_id for c in stops if c.content == "turn"} - trees - by_tree
    return life.cancel_each(list(tops.values()), STOPPED, turns)[1]


def _stoppable(stop: Command, runs: RunTable, trees: Set[str]) -> list[RunState]:
    """The runs ``stop`` cancels, each with its subtree: its run, live here; or, for a stop
    of its tree, the highest live runs under it when it has ended but its tree is held (a
    ``--turn`` stop taken in an earlier poll ended it and left its detached children, which
    the tree stop, posted while it was live, stops; each reports to its nearest live
    ancestor, as a detached run that outlived its parent does)."""
    state = runs.live(stop.run_id)
    if state is not None:
        return [state]
    if stop.run_id not in trees or stop.run_id not in runs:
        return []
    highest: list[RunState] = []
    below = runs.tree.children(stop.run_id)
    while below:
        run_id = below.pop()
        if (live := runs.live(run_id)) is not None:
            highest.append(live)
        else:  # ended too: what outlived it is further down
            below.extend(runs.tree.children(run_id))
    return highest
