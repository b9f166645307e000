"""What `subagents send --wait` reads of a posted mail (``cli/send_wait.outcome``), without
threads: the commands posted to a real (in-memory) store, taken from it and decided by the
core as the command poll does; each outcome the store can say, and None while no runtime
has taken the command."""

from __future__ import annotations

from subagents.cli.send_wait import SendOutcome, outcome
from subagents.messages import MailState, RunFinished
from subagents.supervision.limits import Limits

from .test_core import Harness


def _poll(h: Harness, run_ids: list[str] | None = None) -> None:
    """A runtime's command poll: the pending commands taken and decided."""
    taken = h.store.take_commands(run_ids)
    h.core._do(h.core.core.commands(taken))


def test_none_until_taken_then_delivered_with_its_mail() -> None:
    h = Harness()
    lead = h.run("lead")
    posted = h.store.post_command("send", lead, "hi")
    assert outcome(h.store, lead, posted) is None
    _poll(h)
    found = outcome(h.store, lead, posted)
    assert found is not None and found.state == "delivered" and found.delivered
    [mail] = h.store.mail_for(lead)
    assert found.mail_id == mail.mail_id and mail.state is MailState.DELIVERED


def test_a_mail_for_a_queued_run_is_kept_for_its_start() -> None:
    h = Harness(Limits(max_concurrency=1))
    h.run("lead")
    queued = h.run("worker")
    posted = h.store.post_command("send", queued, "for later")
    _poll(h)
    found = outcome(h.store, queued, posted)
    assert found is not None and (found.state, found.delivered) == ("kept", True)


def test_refused_over_the_hosts_cap_names_why() -> None:
    h = Harness(Limits(max_text_chars=20))
    lead = h.run("lead")
    posted = h.store.post_command("send", lead, "x" * 21)
    _poll(h)
    found = outcome(h.store, lead, posted)
    assert found is not None and found.state == "refused" and not found.delivered
    assert found.error is not None and "over the cap of 20" in found.error


def test_a_run_that_ended_before_its_host_took_the_mail_makes_a_dead_letter() -> None:
    h = Harness()
    lead = h.run("lead")
    h.run("worker", lead, detach=True)  # (its tree stays held: the host takes the command)
    posted = h.store.post_command("send", lead, "too late")
    h.core.finished(RunFinished(run_id=lead, result="done"))
    _poll(h)
    found = outcome(h.store, lead, posted)
    [dead] = h.store.mail_for(lead)
    assert found == SendOutcome(state="dead_letter", mail_id=dead.mail_id, error=found.error)
    assert found.error is not None and "has already ended (completed)" in found.error


def test_each_command_finds_its_own_mail_and_one_taken_with_nothing_kept_is_unknown() -> None:
    h = Harness()
    lead = h.run("lead")
    first = h.store.post_command("send", lead, "same text")
    second = h.store.post_command("send", lead, "same text")
    _poll(h)
    one, two = outcome(h.store, lead, first), outcome(h.store, lead, second)
    assert one is not None and two is not None and one.mail_id != two.mail_id
    # taken by a runtime that holds no such run: nothing kept, nothing said of the run
    gone = h.store.post_command("send", "r-not-held", "lost")
    assert outcome(h.store, "r-not-held", gone) is None
    _poll(h, ["r-not-held"])
    assert outcome(h.store, "r-not-held", gone) == SendOutcome(state="unknown")


def test_a_delivered_mail_its_run_ended_without_reading_is_still_delivered() -> None:
    """What the host did with the mail is the outcome, whenever it is read: a mail it
    delivered stays delivered once the run ends without reading it (a dead letter then),
    as the poll that came first said. (It read ``dead_letter``, exit 1, "the run ended
    before its host took the mail", when `send --wait` polled after that end: the same
    history said two things, by the poll's timing.)"""
    h = Harness()
    lead = h.run("lead")
    posted = h.store.post_command("send", lead, "read me")
    _poll(h)
    first = outcome(h.store, lead, posted)
    assert first is not None and first.state == "delivered"
    h.core.finished(RunFinished(run_id=lead, result="done without reading it"))
    [mail] = h.store.mail_for(lead)
    assert mail.state is MailState.DEAD  # its end made it a dead letter
    later = outcome(h.store, lead, posted)
    assert later is not None and (later.state, later.mail_id) == ("delivered", mail.mail_id)
    assert later.delivered and later.unread_at_end
