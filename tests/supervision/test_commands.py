"""Stop, send and approval commands other processes posted, without threads
(``supervision/commands.py``): the stops one poll takes are one cancel walk, each of its turn
or of its tree as posted, and a slot one of them frees starts no run another one stops."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from subagents.cli.transcript import transcript
from subagents.messages import (
    Command,
    CommandKind,
    DeliverMail,
    EventKind,
    MailState,
    RunFinished,
    RunStatus,
)
from subagents.supervision.effects import Effect, StartRun, StopAgent, Tell
from subagents.supervision.limits import Limits

from .test_core import Harness, of


def _commands(h: Harness, *posted: tuple[CommandKind, str, str | None]) -> list[Effect]:
    commands: Sequence[Command] = [
        Command(command_id=i, kind=kind, run_id=run_id, content=content)
        for i, (kind, run_id, content) in enumerate(posted)
    ]
    return h.core._do(h.core.core.commands(commands)).effects


def test_stops_of_one_poll_start_no_queued_run_they_stop() -> None:
    h = Harness(Limits(max_concurrency=8, per_agent=1))
    first, second, third = h.run("worker"), h.run("worker"), h.run("worker")
    assert [h.status(r) for r in (first, second, third)] == [
        RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.QUEUED
    ]  # fmt: skip
    effects = _commands(h, ("stop", first, None), ("stop", second, None))
    started = [s.record.run_id for s in of(effects, StartRun)]
    assert started == [third]  # the freed slot goes to the run nobody stopped, once
    assert {s.run_id for s in of(effects, StopAgent)} == {first, second}
    assert h.terminal_events(second) and h.status(second) is RunStatus.CANCELLED


def test_a_turn_stop_and_a_tree_stop_of_one_poll_keep_their_scopes() -> None:
    h = Harness()
    lead = h.run("lead")
    ordinary = h.run("worker", lead)
    detached = h.run("worker", lead, detach=True)
    other = h.run("lead")
    other_detached = h.run("worker", other, detach=True)
    _commands(h, ("stop", lead, "turn"), ("stop", other, None))
    assert [h.status(r) for r in (lead, ordinary, other, other_detached)] == [
        RunStatus.CANCELLED
    ] * 4
    assert h.status(detached) is RunStatus.RUNNING  # a stop of the turn leaves it


def test_a_tree_stop_wins_over_a_turn_stop_of_the_same_run() -> None:
    h = Harness()
    lead = h.run("lead")
    detached = h.run("worker", lead, detach=True)
    _commands(h, ("stop", lead, "turn"), ("stop", lead, None))
    assert h.status(lead) is RunStatus.CANCELLED and h.status(detached) is RunStatus.CANCELLED


def test_a_mail_between_stops_keeps_its_place() -> None:
    """A send posted after a run's stop finds it ended (dead, as when handled one by one);
    one posted before the stop of another is delivered to it before it stops."""
    h = Harness()
    stopped_first, stopped_later = h.run("lead"), h.run("lead")
    effects = _commands(
        h,
        ("stop", stopped_first, None),
        ("send", stopped_later, "before its stop"),
        ("send", stopped_first, "after its stop"),
        ("stop", stopped_later, None),
    )
    to_later = [
        type(e.message) if isinstance(e, Tell) else type(e)
        for e in effects
        if isinstance(e, Tell | StopAgent) and e.run_id == stopped_later
    ]
    assert to_later == [DeliverMail, StopAgent]
    [late] = h.store.mail_for(stopped_first)
    assert (late.content, late.state) == ("after its stop", MailState.DEAD)


def test_a_send_between_stops_starts_no_queued_run_they_stop() -> None:
    """``subagents stop --all`` racing a ``subagents send`` from another process: the poll
    takes a stop, the send, then the next stop. The slot the first stop frees must not go to
    a queued run the later stop cancels (started only to be stopped): the queue gets the
    slots once every stop of the poll is decided."""
    h = Harness(Limits(max_concurrency=8, per_agent=1))
    first, second, third = h.run("worker"), h.run("worker"), h.run("worker")
    other = h.run("lead")
    effects = _commands(
        h, ("stop", first, None), ("send", other, "in between"), ("stop", second, None)
    )
    started = [s.record.run_id for s in of(effects, StartRun)]
    assert started == [third]  # not [second, third]: second's agent never started
    assert h.status(second) is RunStatus.CANCELLED and h.status(other) is RunStatus.RUNNING
    assert [type(e.message) for e in of(effects, Tell) if e.run_id == other] == [DeliverMail]


def test_a_tree_stop_wins_over_a_turn_stop_of_the_same_run_across_a_send() -> None:
    """A ``--turn`` stop, a send from another process, then a tree stop of the same run,
    all in one poll: the tree stop wins, as it does when the two stops are next to each
    other. Split by the send, the turn stop ended the run alone and the tree stop found it
    ended, leaving its detached child running."""
    h = Harness()
    lead = h.run("lead")
    detached = h.run("worker", lead, detach=True)
    other = h.run("lead")
    _commands(h, ("stop", lead, "turn"), ("send", other, "in between"), ("stop", lead, None))
    assert h.status(lead) is RunStatus.CANCELLED and h.status(detached) is RunStatus.CANCELLED
    assert h.status(other) is RunStatus.RUNNING


def test_a_tree_stop_taken_in_a_later_poll_than_a_turn_stop_ends_the_detached_children() -> None:
    """The two stops of one run in two polls (posted apart, or by PostgreSQL's notices): the
    ``--turn`` stop ended the run, so the tree stop finds it ended. Its detached children are
    still its tree, and the tree stop reaches them (they went on, for ever, before)."""
    h = Harness()
    lead = h.run("lead")
    ordinary = h.run("worker", lead)
    detached = h.run("worker", lead, detach=True)
    below = h.run("critic", detached)
    _commands(h, ("stop", lead, "turn"))
    assert [h.status(r) for r in (lead, ordinary)] == [RunStatus.CANCELLED] * 2
    assert h.status(detached) is RunStatus.RUNNING
    assert lead in h.core.core.hosted()  # its tree is held: its commands are still taken here
    effects = _commands(h, ("stop", lead, None))
    assert [h.status(r) for r in (detached, below)] == [RunStatus.CANCELLED] * 2
    assert [s.run_id for s in of(effects, StopAgent)] == [below, detached]  # deepest first
    assert h.terminal_events(lead) == [EventKind.CANCELLED]  # ended once
    assert lead not in h.core.core.hosted()  # nothing of the tree is live: forgotten


def test_a_turn_stop_taken_in_a_later_poll_leaves_the_detached_children() -> None:
    """The other way round changes nothing: a ``--turn`` stop of a run already ended stops
    nothing, its detached children go on."""
    h = Harness()
    lead = h.run("lead")
    detached = h.run("worker", lead, detach=True)
    h.core.finished(RunFinished(run_id=lead, result="done"))
    assert _commands(h, ("stop", lead, "turn")) == []
    assert h.status(lead) is RunStatus.COMPLETED and h.status(detached) is RunStatus.RUNNING


def test_a_posted_mail_the_mail_room_refuses_is_said_in_the_log() -> None:
    """``subagents send`` told its user the mail would be delivered, then exited; a mail over
    this runtime's cap was dropped without a word. It is still refused (the cap holds), and
    the runtime's log says so, naming the run, the command and why; the rest of the poll
    acts as posted."""
    h = Harness(Limits(max_text_chars=20))
    reader, stopped = h.run("lead"), h.run("worker")
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        with structlog.testing.capture_logs() as logs:
            effects = _commands(h, ("send", reader, "x" * 21), ("stop", stopped, None))
    finally:
        structlog.configure(**saved)
    [said] = [e for e in logs if e["event"] == "a mail posted from another process was refused"]
    assert (said["run_id"], said["command_id"], said["log_level"]) == (reader, 0, "warning")
    assert "over the cap of 20" in said["error"]
    assert h.store.mail_for(reader) == [] and not [e for e in of(effects, Tell)]
    assert h.status(stopped) is RunStatus.CANCELLED
    # and the run's events say it, for `subagents log` (the host's log is not the sender's)
    [refused] = [e for e in h.store.events(reader) if e.kind is EventKind.MAIL_REFUSED]
    assert (refused.data["command_id"], refused.data["sender"]) == (0, "external")
    assert "over the cap of 20" in refused.data["error"] and "mail_id" not in refused.data


def test_a_posted_mail_to_a_run_that_ended_meanwhile_is_a_dead_letter_its_events_say() -> None:
    """Posted while the run was live, taken after it ended (its tree still held: a
    detached child runs on): the mail is kept as a dead letter, and the ended run's events
    say so (a run's own dead letters were its sender's event; the outside has none)."""
    h = Harness()
    lead = h.run("lead")
    h.run("worker", lead, detach=True)
    h.core.finished(RunFinished(run_id=lead, result="done"))
    assert h.status(lead) is RunStatus.COMPLETED
    _commands(h, ("send", lead, "too late"))
    [dead] = h.store.mail_for(lead)
    assert dead.state is MailState.DEAD
    [refused] = [e for e in h.store.events(lead) if e.kind is EventKind.MAIL_REFUSED]
    assert refused.data["mail_id"] == dead.mail_id and refused.data["command_id"] == 0
    assert "has already ended (completed)" in refused.data["error"]
    record = h.store.get_run(lead)
    assert record is not None  # `subagents log` shows it: what became of the posted mail
    entries = transcript(record, h.store.events(lead), None, h.store.mail_for(lead))
    [shown] = [e for e in entries if e.kind == "mail_refused"]
    assert shown.text.startswith("sender external, error run ") and dead.mail_id in shown.text


def test_a_later_tree_stop_tells_the_live_ancestor_its_detached_run_ended() -> None:
    """The tree stop of a run ended by an earlier ``--turn`` stop cancels its detached child,
    which reports to its nearest live ancestor, as any detached run that outlived its
    parent does: that ancestor is not left waiting for a result that never comes."""
    h = Harness()
    lead = h.run("lead")
    middle = h.run("worker", lead)
    detached = h.run("critic", middle, detach=True)
    _commands(h, ("stop", middle, "turn"))
    assert h.status(middle) is RunStatus.CANCELLED and h.status(lead) is RunStatus.RUNNING
    _commands(h, ("stop", middle, None))
    assert h.status(detached) is RunStatus.CANCELLED
    told = [m.content for m in h.store.mail_for(lead) if m.recipient == lead]
    assert any(c.startswith("[detached result]") and detached in c for c in told), told


def test_a_later_tree_stop_wins_over_a_turn_stop_of_what_outlived_the_run() -> None:
    """In one poll, the tree stop of a run ended earlier (by a ``--turn`` stop) and a
    ``--turn`` stop of its detached child: the tree stop reaches that child's own detached
    child too, as a tree stop wins over a turn stop of a run it stops."""
    h = Harness()
    lead = h.run("lead")
    detached = h.run("worker", lead, detach=True)
    below = h.run("critic", detached, detach=True)
    _commands(h, ("stop", lead, "turn"))
    _commands(h, ("stop", detached, "turn"), ("stop", lead, None))
    assert [h.status(r) for r in (detached, below)] == [RunStatus.CANCELLED] * 2


def test_later_tree_stops_across_a_send_start_no_queued_run_they_stop() -> None:
    """Two tree stops of runs ended earlier (by ``--turn`` stops) with a send between them,
    in one poll: the slot the first one's detached child frees goes to the queue only after
    the poll's last stop, as for any stops of a poll. Before, the runs a tree stop of an
    ended run reached were not counted as ending for the poll: the first walk gave the
    queue the slot at once, and the second's queued detached child was started only to be
    stopped."""
    h = Harness(Limits(max_concurrency=8, per_agent=1))
    lead, second = h.run("lead"), h.run("lead")
    detached = h.run("worker", lead, detach=True)
    queued = h.run("worker", second, detach=True)
    third = h.run("worker")
    other = h.run("lead")
    assert [h.status(r) for r in (detached, queued, third)] == [
        RunStatus.RUNNING, RunStatus.QUEUED, RunStatus.QUEUED
    ]  # fmt: skip
    _commands(h, ("stop", lead, "turn"), ("stop", second, "turn"))
    assert h.status(lead) is RunStatus.CANCELLED and h.status(second) is RunStatus.CANCELLED
    assert h.status(detached) is RunStatus.RUNNING and h.status(queued) is RunStatus.QUEUED
    effects = _commands(
        h, ("stop", lead, None), ("send", other, "in between"), ("stop", second, None)
    )
    started = [s.record.run_id for s in of(effects, StartRun)]
    assert started == [third]  # not [queued, third]: queued's agent never started
    assert h.status(detached) is RunStatus.CANCELLED and h.status(queued) is RunStatus.CANCELLED
    assert [type(e.message) for e in of(effects, Tell) if e.run_id == other] == [DeliverMail]
