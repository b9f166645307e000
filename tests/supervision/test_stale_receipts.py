"""Read receipts from a start that is over (``MailRoom.read``), without threads: a restarted
run's old actor may still be finishing a handling, and its receipt (a ``MailRead``, or the
read mail of its ``Journal``) comes after the restart. The mail was handed to the current
start too, which has not read it: it stays in the inbox and unread in the store (else a crash
after that loses it: a resume hands over only unread mail), and the current start's own
receipt still marks it read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Journal,
    JournalEntry,
    MailRead,
    MailState,
    RunFinished,
    StopRequest,
)
from subagents.supervision.effects import ScheduleRestart, StartRun
from subagents.supervision.limits import Limits

from .test_core import Harness, of

Receipt = Callable[[Harness, str, str, int], None]


def _mail_read(h: Harness, run_id: str, mail_id: str, attempt: int) -> None:
    h.core.mail_reads([MailRead(run_id=run_id, mail_ids=(mail_id,), attempt=attempt)])


def _journal(h: Harness, run_id: str, mail_id: str, attempt: int) -> None:
    entry = JournalEntry(request_id=f"{run_id}:{attempt}:1", kind="receive", observed=True)
    msg = Journal(run_id=run_id, entries=(entry,), read_mail=(mail_id,), attempt=attempt)
    h.core._do(h.core.core.recorded([msg]))


RECEIPTS = [pytest.param(_mail_read, id="MailRead"), pytest.param(_journal, id="Journal")]


def _restarting() -> tuple[Harness, str, str]:
    """A worker (restarted when it fails) with a mail from its lead it has not read: the
    harness, the worker and the mail."""
    lead = AgentSpec(name="lead", description="d")
    worker = AgentSpec(name="worker", description="d", restart="transient")
    h = Harness(Limits(), lead, worker)
    root = h.run("lead")
    child = h.run("worker", root)
    ack = h.mail(root, child)
    assert ack.error is None and ack.mail_id is not None
    return h, child, ack.mail_id


def _fail(h: Harness, run_id: str, attempt: int) -> None:
    effects = h.core.finished(
        RunFinished(run_id=run_id, error_kind="crash", error="x", attempt=attempt)
    )
    assert of(effects, ScheduleRestart) != []


def _state_of(h: Harness, run_id: str, mail_id: str) -> MailState:
    (mail,) = [m for m in h.store.mail_for(run_id) if m.mail_id == mail_id]
    return mail.state


@pytest.mark.parametrize("receipt", RECEIPTS)
def test_an_earlier_starts_receipt_leaves_the_mail_to_the_current_start(receipt: Receipt) -> None:
    h, child, mail_id = _restarting()
    _fail(h, child, 1)
    (start,) = of(h.core.restart_due(child), StartRun)
    assert start.attempt == 2 and [m.mail_id for m in start.pending_mail] == [mail_id]
    receipt(h, child, mail_id, 1)  # the old actor's, late
    assert h.unread(child) == [mail_id]
    assert _state_of(h, child, mail_id) is MailState.DELIVERED
    receipt(h, child, mail_id, 2)  # the current start's own
    assert h.unread(child) == []
    assert _state_of(h, child, mail_id) is MailState.READ


@pytest.mark.parametrize("receipt", RECEIPTS)
def test_a_receipt_between_starts_leaves_the_mail_for_the_next_start(receipt: Receipt) -> None:
    """The failed start's receipt comes while the restart waits for its backoff: the start
    that read the mail is over (its journal is not kept), so the next start is handed it."""
    h, child, mail_id = _restarting()
    _fail(h, child, 1)
    receipt(h, child, mail_id, 1)
    assert _state_of(h, child, mail_id) is MailState.DELIVERED
    (start,) = of(h.core.restart_due(child), StartRun)
    assert [m.mail_id for m in start.pending_mail] == [mail_id]


@pytest.mark.parametrize("receipt", RECEIPTS)
def test_the_current_starts_receipt_and_one_from_no_actor_mark_the_mail_read(
    receipt: Receipt,
) -> None:
    for attempt in (1, 0):
        h, child, mail_id = _restarting()
        receipt(h, child, mail_id, attempt)
        assert h.unread(child) == []
        assert _state_of(h, child, mail_id) is MailState.READ


@pytest.mark.parametrize("receipt", RECEIPTS)
def test_a_receipt_of_a_start_over_before_its_run_ended_leaves_the_dead_letter(
    receipt: Receipt,
) -> None:
    """Stopped while it waited for its restart, the run ended with the mail unread: a dead
    letter (its sender told it was not read). The failed start's late receipt is as void
    after that end as it was before it (``between_starts``): it must not make the dead
    letter read. (An ended run's last start keeps its receipts only if it was not over
    before the end.)"""
    h, child, mail_id = _restarting()
    _fail(h, child, 1)
    reply, _ = h.core.stop(StopRequest(request_id="s", run_id=child))
    assert reply.error is None and _state_of(h, child, mail_id) is MailState.DEAD
    receipt(h, child, mail_id, 1)
    assert _state_of(h, child, mail_id) is MailState.DEAD


@pytest.mark.parametrize("receipt", RECEIPTS)
def test_a_late_receipt_of_a_stopped_runs_last_start_makes_its_dead_letter_read(
    receipt: Receipt,
) -> None:
    """Kept on purpose (docs/runtime.md, "every mail is read or comes back"): stopped while
    its last start's receipt was on its way (a handling that showed the mail to its model,
    or handed it to its function, then told its reports), the run ends with the mail still
    in its inbox: a dead letter, its sender told. The receipt that then lands is from the
    start that took the mail, which was the run's start at its end: the mail WAS read, so it
    ends read (nothing lost: an ended run is never resumed, so no later start would be
    handed it). The sender's notice stays: it said the mail was not known read at the end."""
    h, child, mail_id = _restarting()
    reply, _ = h.core.stop(StopRequest(request_id="s", run_id=child))
    assert reply.error is None and _state_of(h, child, mail_id) is MailState.DEAD
    receipt(h, child, mail_id, 1)
    assert _state_of(h, child, mail_id) is MailState.READ
