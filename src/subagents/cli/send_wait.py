"""What became of a mail `subagents send --wait` posted: read from the store, where the
runtime that took the command wrote it.

Why: `send` posts the mail as a command and the host takes it later; a refusal there (over
the host's cap on text, the run ended meanwhile: a dead letter) was only in `subagents log`.
The host claims the command in the same transaction as the writes acting on it
(``actors/command_poll.py``), so once it is taken the store says the outcome: the mail kept
under the command's request id (``messages.durability.command_request_id``), its state
delivered, waiting for a queued run, or dead; or a ``mail_refused`` event naming the command.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import msgspec

from subagents.messages import Event, EventKind, MailState
from subagents.messages.durability import command_request_id

if TYPE_CHECKING:
    from subagents.store.base import RunStore

POLL_S = 0.2


class SendOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What became of a posted mail (`send --wait`; `--json` prints it as ``outcome``)."""

    state: str
    """``delivered`` (to the live run), ``kept`` (the run is queued: handed over when it
    starts), ``refused`` (by the host: ``error`` says why), ``dead_letter`` (the run ended
    before the host took it: never read), ``unknown`` (taken, but nothing says what became
    of it: a runtime that no longer holds the run took it, its log says; or a runtime of
    a version before `send --wait`, which kept the mail under another request id)."""
    mail_id: str | None = None
    error: str | None = None
    unread_at_end: bool = False
    """``delivered``/``kept``, and the run has since ended without reading it (a dead
    letter now): what the host did stays the outcome, however late it is read."""

    @property
    def delivered(self) -> bool:
        """The mail reached the run, or waits for its start in its inbox."""
        return self.state in ("delivered", "kept")


_STATES = {
    MailState.DELIVERED: "delivered",
    MailState.READ: "delivered",
    MailState.ACCEPTED: "kept",
    MailState.DEAD: "dead_letter",
}


def outcome(store: RunStore, run_id: str, command_id: int) -> SendOutcome | None:
    """What became of the mail of ``send`` command ``command_id`` for ``run_id``, or None
    while no runtime has taken it. Read in the order things are written: which runs have
    commands pending first (once it is taken, what its taking wrote is in the reads after),
    the mail, then the events (a run's end makes its unread mail dead letters in the same
    transaction as their ``dead_letter`` events: a mail read dead has its event read)."""
    pending = run_id in store.pending_command_runs()
    request_id = command_request_id(command_id)
    kept = None
    for mail in store.mail_for(run_id):
        if mail.request_id == request_id and mail.recipient == run_id:
            kept = mail
            break
    events = store.events(run_id)
    for event in reversed(events):
        if event.kind is EventKind.MAIL_REFUSED and event.data.get("command_id") == command_id:
            mail_id = event.data.get("mail_id")
            state = "dead_letter" if mail_id is not None else "refused"
            return SendOutcome(state=state, mail_id=mail_id, error=event.data.get("error"))
    if kept is None:
        return None if pending else SendOutcome(state="unknown")
    if kept.state is MailState.DEAD and _left_unread(events, kept.mail_id):
        return SendOutcome(state="delivered", mail_id=kept.mail_id, unread_at_end=True)
    return SendOutcome(state=_STATES[kept.state], mail_id=kept.mail_id)


def _left_unread(events: list[Event], mail_id: str) -> bool:
    """A dead letter its run's end made (``MailRoom.dead_letters``: a ``dead_letter`` event
    of the recipient names it): the host had delivered it (or kept it for the queued run),
    and the run ended without reading it. One the host made when it took the command (the
    run had ended) has a ``mail_refused`` event instead, or none at all (a forgotten
    tree's), never a ``dead_letter`` event of the run (its sender, the outside, is no run)."""
    return any(e.kind is EventKind.DEAD_LETTER and e.data.get("mail_id") == mail_id for e in events)


def wait_for(store: RunStore, run_id: str, command_id: int, timeout: float) -> SendOutcome | None:
    """``outcome`` once a runtime has taken the command, or None if none did within
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = outcome(store, run_id, command_id)
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            return None
        time.sleep(POLL_S)
