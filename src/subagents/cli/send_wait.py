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

from subagents.messages import EventKind, MailState
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
    of it: a runtime that no longer holds the run took it; its log says)."""
    mail_id: str | None = None
    error: str | None = None

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
    while no runtime has taken it. (Which runs have commands pending is read first: once
    it is taken, what its taking wrote is in the reads after.)"""
    pending = run_id in store.pending_command_runs()
    for event in reversed(store.events(run_id)):
        if event.kind is EventKind.MAIL_REFUSED and event.data.get("command_id") == command_id:
            mail_id = event.data.get("mail_id")
            state = "dead_letter" if mail_id is not None else "refused"
            return SendOutcome(state=state, mail_id=mail_id, error=event.data.get("error"))
    request_id = command_request_id(command_id)
    for mail in store.mail_for(run_id):
        if mail.request_id == request_id and mail.recipient == run_id:
            return SendOutcome(state=_STATES[mail.state], mail_id=mail.mail_id)
    return None if pending else SendOutcome(state="unknown")


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
