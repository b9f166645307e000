"""MailRoom: where mail between runs is addressed, recorded, delivered, read and returned.

What it decides:
- routing: an address (a run id, or an agent name within the sender's tree) resolves to one
  run (``addresses``); an unknown name fails that mail only, with the candidates named; a
  topic address (``topic:NAME``) resolves to the runs of the tree subscribed to it
  (``topics``), one ordinary mail each;
- what becomes of a mail: delivered to a live run, kept for a queued one (handed over when it
  starts), kept as a dead letter for an ended one (its sender is told), or passed on as a
  command to the runtime that hosts the run (mail from the outside only);
- receipts: read mail leaves the run's inbox; whatever a run had not read when it ended is a
  dead letter, and each live sender hears of it once.

Every mail sent through it is written (``SaveMails``) before anything acknowledges it (a mail
its sender's record may have written already, whose answer the sender did not see, comes
named by that record: ``SendMail.mail_id``; the store keeps a mail id once); the
deliveries, events and acknowledgements of one message are grouped per recipient, per
(sender, recipient) and per sender (``supervision.mailing``). Mail a run took straight to its
recipient (``supervision.mail_routes``, ``actors/mail_desk.py``) it hears of after
(``posted``): recorded by its sender already when the store has senders record it, else
written here; then in the inboxes and the events as any mail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import msgspec

from subagents.messages import (
    EXTERNAL_SENDER,
    TOPIC_PREFIX,
    DeliverMail,
    EventKind,
    Mail,
    MailAck,
    MailPosted,
    MailState,
    RunRecord,
    SendMail,
    new_id,
)
from subagents.store.writes import PostCommand, SaveMails, SetMailsState, Write
from subagents.supervision.addresses import Addresses, Destination
from subagents.supervision.effects import Decided, Tell
from subagents.supervision.inbox_ledger import InboxLedger
from subagents.supervision.isolated import each, failure_reason
from subagents.supervision.limits import Limits
from subagents.supervision.mailing import (
    MailPost,
    acks_by_sender,
    announce,
    announce_one,
    named_records,
    pairs_of,
)
from subagents.supervision.requests import mail_problem
from subagents.supervision.runs import RunState, RunTable
from subagents.supervision.topics import Topics, topic_of

_DEAD, _READ = MailState.DEAD, MailState.READ  # (named once: ``mailing.py`` says why)


class MailRoom:
    """Routing, recording, delivery, receipts and dead letters of mail between runs."""

    def __init__(
        self,
        runs: RunTable,
        now: Callable[[], float],
        read_run: Callable[[str], RunRecord | None],
        limits: Limits,
    ) -> None:
        self.runs = runs
        self.now = now
        """The wall clock (mail ids, sent times, events)."""
        self.limits = limits
        self.addresses = Addresses(runs, read_run)
        """Where a mail goes (``addresses``), given ``read_run``: the record of a run this
        core does not hold (ended and forgotten, or hosted by another runtime on the store),
        the one read the mail room needs."""
        self.topics = Topics()
        """Who is subscribed to which topic of each tree (``topics``)."""
        self.ledger = InboxLedger()
        """The inbox changes of the items of an isolated batch (``inbox_ledger``)."""

    # ---- sending ---------------------------------------------------------------------------

    def send(self, msgs: Sequence[SendMail]) -> tuple[list[MailAck], Decided]:
        """Route, record and deliver ``msgs`` (one, or a step's several) in order; each
        sending run is told its acknowledgements as one message. The acknowledgements, and
        what the sending comes to.

        Each mail is answered on its own: a bad address fails that mail only, and order per
        sender is kept. A sender is checked once per run of its mails."""
        sends, out = _Sends(MailPost(self.now()), self.runs), Decided()
        each(msgs, partial(self._send_one, sends), out, sends.refused)
        post, acks = sends.post, sends.acks
        self._record(post, out)
        out.writes.extend(named_records(sends.recorded_as, msgs, acks, post.now))
        out.effects.extend(Tell(r, a) for r, a in acks_by_sender(msgs, acks, self.runs.answers))
        return acks, out

    def _send_one(self, sends: _Sends, msg: SendMail) -> Decided:
        """``msg`` routed, recorded and delivered: its acknowledgement added to ``sends``
        (``send``); what it comes to."""
        one, sender, acks, post = Decided(), msg.sender, sends.acks, sends.post
        sends.mark = len(post.records)
        if sender == EXTERNAL_SENDER:
            sends.sender_state, sends.checked = None, None
        else:
            checked = sends.checked
            if checked is None or checked[0] != sender or checked[1] != msg.attempt:
                sends.sender_state = self.runs.reporting(sender, msg.attempt)
                sends.checked = (sender, msg.attempt)
            if sends.sender_state is None:
                acks.append(
                    MailAck(request_id=msg.request_id, error=f"run {sender} is not running")
                )
                return one
        sender_state = sends.sender_state
        problem = mail_problem(msg, self.limits)  # its types and its size
        if problem is not None:
            acks.append(MailAck(request_id=msg.request_id, error=problem))
            return one
        if msg.to.startswith(TOPIC_PREFIX):  # one mail to each subscriber (``topics``)
            acks.append(self._publish(post, msg, sender_state, one))
            return one
        try:
            recipient = self.addresses.resolve(msg)
        except ValueError as exc:
            acks.append(MailAck(request_id=msg.request_id, error=str(exc)))
            return one
        dest = sends.dests.get(recipient)
        if dest is None:  # what becomes of mail to it cannot change within one message
            dest = sends.dests[recipient] = self.addresses.destination(recipient)
        mail_state, record, target = dest
        if mail_state is None:
            acks.append(
                self._elsewhere(sender, recipient, msg.content, msg.request_id, record, one)
            )
            return one
        mail = Mail(
            mail_id=msg.mail_id or post.new_id(),
            sender=sender,
            recipient=recipient,
            content=msg.content,
            sender_agent=sender_state.record.agent if sender_state is not None else None,
            reply_to=msg.reply_to,
            sent_at=post.now,
            state=mail_state,
            request_id=msg.request_id,
        )
        acks.append(self._add(post, mail, msg.request_id, sender_state, record, target, one))
        if msg.mail_id is not None and mail_state is not MailState.DELIVERED:
            sends.recorded_as.append(mail)
        return one

    def _publish(
        self, post: MailPost, msg: SendMail, sender: RunState | None, decided: Decided
    ) -> MailAck:
        """Mail to ``topic:NAME``: an ordinary mail to each run of the sender's tree
        subscribed to it now, in the order they subscribed; one acknowledgement naming
        them (none subscribed: nothing sent)."""
        try:
            topic = topic_of(msg.to)
        except ValueError as exc:
            return MailAck(request_id=msg.request_id, error=str(exc))
        if sender is None or topic is None:
            error = f"mail to {msg.to} must come from a run: a topic belongs to a run's tree"
            return MailAck(request_id=msg.request_id, error=error)
        root, first, reached = sender.record.root_run_id, None, []
        for recipient in self.topics.subscribers(root, topic, sender.run_id):
            mail_state, record, target = self.addresses.destination(recipient)
            if mail_state is None or mail_state is MailState.DEAD:
                continue  # (a run's subscriptions end with it: not expected)
            mail = Mail(
                mail_id=post.new_id(),
                sender=sender.run_id,
                recipient=recipient,
                content=msg.content,
                sender_agent=sender.record.agent,
                reply_to=msg.reply_to,
                sent_at=post.now,
                state=mail_state,
                request_id=msg.request_id,
                topic=topic,
            )
            self._add(post, mail, msg.request_id, sender, record, target, decided)
            first = first or mail.mail_id
            reached.append(recipient)
        recipients = tuple(reached)
        return MailAck(
            request_id=msg.request_id, mail_id=first, recipient=msg.to, recipients=recipients
        )

    def posted(self, msg: MailPosted, publish: bool = True) -> Decided:
        """Mail a run took straight to its recipients (``actors/mail_desk.py``), heard of
        after: kept (unless its sender recorded it already), in the recipients' inboxes (so
        their read receipts and their ends find it), announced as any mail (one mail's
        events published only if ``publish``: someone is handed them). A mail handed to
        a start its recipient has since left (a restart) is delivered again, to the current
        start (or handed over at the next); one whose recipient ended before this report
        came was never read: a dead letter, its sender told, as for unread mail at an end."""
        out = Decided()
        if not msg.recorded:
            out.writes.append(SaveMails(msg.mails))
        mails = msg.mails  # (a ping-pong's every post: one mail to a live run, no pairs)
        one = len(mails) == 1 == len(msg.delivered_to)  # (else the loop says it is malformed)
        target = self.runs.live(mails[0].recipient) if one else None
        if target is not None and (mail := mails[0]).state is not _DEAD:
            target.inbox[mail.mail_id] = mail  # (as below, for one)
            announce_one(self.runs, self.now(), mail, target, out, publish, msg.recorded)
            if msg.delivered_to[0] != target.attempt and target.reads is None:
                out.effects.append(Tell(mail.recipient, DeliverMail(mails=(mail,))))
            return out
        kept: list[Mail] = []  # (a list, not a ``MailPost``: these have their ids and times)
        again: dict[str, list[Mail]] = {}
        for mail, attempt in zip(msg.mails, msg.delivered_to, strict=True):
            target = self.runs.live(mail.recipient)
            if target is None:
                out.writes.append(SetMailsState((mail.mail_id,), MailState.DEAD))
                ended = self.runs.get(mail.recipient)
                if ended is not None:
                    out.add(self._returned(ended, mail))
                continue
            target.inbox[mail.mail_id] = mail
            kept.append(mail)
            if attempt != target.attempt and target.reads is None:
                again.setdefault(mail.recipient, []).append(mail)
        now, runs = self.now, self.runs
        for pair in pairs_of(kept):
            announce(runs, now, pair.sender, pair.recipient, True, pair.mail_ids, out)
        if again:  # (rare: a restart; most posts make no generator for nothing)
            out.effects.extend(Tell(r, DeliverMail(mails=tuple(m))) for r, m in again.items())
        return out

    def notify(self, sender: RunState, recipient: str, content: str) -> Decided:
        """Mail from the supervisor on ``sender``'s behalf (a background child's result, a
        dead letter returned): recorded and delivered as any mail, acknowledged to nobody."""
        decided = Decided()
        now = self.now()
        mail = Mail(
            mail_id=new_id("m", now),
            sender=sender.run_id,
            recipient=recipient,
            sender_agent=sender.record.agent,
            content=content,
            sent_at=now,
        )
        post = MailPost(now)
        mail_state, record, target = self.addresses.destination(recipient)
        if mail_state is not None:
            mail = msgspec.structs.replace(mail, state=mail_state)
            self._add(post, mail, "", sender, record, target, decided)
        self._record(post, decided)
        return decided

    def _add(
        self,
        post: MailPost,
        mail: Mail,
        request_id: str,
        sender: RunState | None,
        record: RunRecord | None,
        target: RunState | None,
        decided: Decided,
    ) -> MailAck:
        """Add ``mail`` (its state already says what becomes of it) to ``post``."""
        post.add(mail)
        if mail.state is not MailState.DEAD:
            assert target is not None
            if (changes := self.ledger.changes) is not None:
                changes.append((target, mail.mail_id, target.inbox.get(mail.mail_id)))
            target.inbox[mail.mail_id] = mail
            return MailAck(request_id=request_id, mail_id=mail.mail_id, recipient=mail.recipient)
        if sender is not None:  # each dead letter is an error its sender hears of
            data = {"mail_id": mail.mail_id, "recipient": mail.recipient}
            decided.event(EventKind.DEAD_LETTER, sender.record, self.now(), data)
        status = record.status if record is not None else "unknown"
        return MailAck(
            request_id=request_id,
            mail_id=mail.mail_id,
            recipient=mail.recipient,
            dead_letter=True,
            error=f"run {mail.recipient} has already ended ({status}); the mail was kept as"
            " a dead letter and will not be read",
        )

    def _elsewhere(
        self,
        sender: str,
        recipient: str,
        content: str,
        request_id: str,
        record: RunRecord | None,
        decided: Decided,
    ) -> MailAck:
        """Mail to a live run that another runtime on this store hosts: a run's is refused,
        the outside's becomes a command for that runtime."""
        if sender != EXTERNAL_SENDER:
            owner = record.owner if record is not None else "?"
            return MailAck(
                request_id=request_id,
                error=f"run {recipient} is hosted by another runtime ({owner})",
            )
        decided.writes.append(PostCommand("send", recipient, content))
        command = new_id("command-", self.now())
        return MailAck(request_id=request_id, mail_id=command, recipient=recipient)

    def _record(self, post: MailPost, decided: Decided) -> None:
        """Write the post's mails, then their events and their deliveries (one per recipient)."""
        records = post.records
        if not records:
            return
        decided.writes.append(SaveMails(tuple(records)))
        now, runs = self.now, self.runs
        for pair in post.pairs():
            announce(runs, now, pair.sender, pair.recipient, pair.delivered, pair.mail_ids, decided)
        tells = decided.effects
        for recipient, mails in post.deliveries().items():
            tells.append(Tell(recipient, DeliverMail(mails=tuple(mails))))

    # ---- receipts, hand-over, dead letters -------------------------------------------------

    def read(self, run_id: str, mail_ids: Sequence[str], attempt: int = 0) -> Decided:
        """``run_id`` has read ``mail_ids`` (the one receipt: a ``MailRead``, or the mail a
        step or a tool result showed the model): out of its inbox, and the write that marks
        them read in the store. Consecutive receipts of one message are one write: the
        caller's gathering joins them (``effects.join``).

        A receipt from a start that is over (``attempt``, 0: not from a run's actor) is
        void: its mail was handed to the current start too, which has not read it; marked
        read, it would leave the inbox (no dead letter at the end) and, after a crash, no
        resume would hand it over again."""
        decided = Decided()
        if not mail_ids:
            return decided
        state = self.runs.get(run_id)
        if state is not None and attempt and self._stale(state, attempt):
            return decided
        if state is None:
            decided.writes.append(SetMailsState(tuple(mail_ids), MailState.READ))
        else:
            self.read_now(state, mail_ids, decided.writes)
        return decided

    def read_now(self, state: RunState, mail_ids: Sequence[str], writes: list[Write]) -> None:
        """``read`` of a receipt its run's current start made (``RunTable.reporting`` says
        so: never stale), its write added to ``writes`` (a journal's: ``Recorded.journal``)."""
        inbox = state.inbox
        for mail_id in mail_ids:
            inbox.pop(mail_id, None)
        writes.append(SetMailsState(tuple(mail_ids), _READ))

    def _stale(self, state: RunState, attempt: int) -> bool:
        """A report of start ``attempt`` comes from a start of ``state``'s run that is over:
        an earlier one, or the latest while the run waits to start again (an ended run's
        last start keeps its receipts: its end may be decided before they come; unless a
        restart had ended it before: its unread mail is a dead letter, not read)."""
        if attempt != state.attempt:
            return True
        if state.record.status.terminal:
            return state.between_starts()
        return state.reads is not None or state.between_starts()  # as ``RunTable.reporting``

    def hand_over(self, state: RunState) -> tuple[tuple[Mail, ...], Decided]:
        """The unread mail a starting run is handed: what waited for it while it was queued
        (delivered now) and, on a restart, what its earlier start had not read; and what
        handing it over comes to (the queued mail's delivery, written and announced)."""
        decided = Decided()
        if not state.inbox:
            return (), decided
        mails: list[Mail] = []
        accepted: list[str] = []
        for mail in state.inbox.values():
            if mail.state is MailState.ACCEPTED:  # sent while queued: delivered only now
                accepted.append(mail.mail_id)
                mail = msgspec.structs.replace(mail, state=MailState.DELIVERED)
                data = {"mail_id": mail.mail_id, "sender": mail.sender}
                decided.event(EventKind.MAIL_DELIVERED, state.record, self.now(), data)
            mails.append(mail)
        if accepted:
            decided.writes.append(SetMailsState(tuple(accepted), MailState.DELIVERED))
            if (changes := self.ledger.changes) is not None:
                changes.append((state, None, state.inbox))
            state.inbox = {m.mail_id: m for m in mails}
        return tuple(mails), decided

    def dead_letters(self, state: RunState, unread: Sequence[str]) -> Decided:
        """``state`` ended: the mail that reached it (or waited for it while queued) and was
        never read is a dead letter, and each live sender hears of it, once."""
        decided = Decided()
        inbox, state.inbox = state.inbox, {}
        leftover = list(inbox)  # in the order it was delivered (ids order only to the ms)
        if not leftover:
            return decided
        if (changes := self.ledger.changes) is not None:
            changes.append((state, None, inbox))
        decided.writes.append(SetMailsState(tuple(leftover), MailState.DEAD))
        for mail_id in leftover:
            decided.add(self._returned(state, inbox[mail_id]))
        return decided

    def _returned(self, state: RunState, mail: Mail) -> Decided:
        """``mail`` to ``state``'s run was never read and it has ended: its ``dead_letter``
        event, and a notice to its sender if that is live (the mail's state is the
        caller's write)."""
        decided = Decided()
        record = state.record
        data = {"mail_id": mail.mail_id, "sender": mail.sender}
        decided.event(EventKind.DEAD_LETTER, record, self.now(), data)
        if self.runs.live(mail.sender) is not None:
            notice = self.notify(
                state,
                mail.sender,
                f"[dead letter] your mail {mail.mail_id} to {record.agent} ({record.run_id})"
                f" was not read before it ended ({record.status})",
            )
            decided.add(notice)
        return decided


class _Sends:
    """What the mails of one ``MailRoom.send`` share as each is sent: the post, the
    acknowledgements so far, the destinations looked up, the sender last checked."""

    __slots__ = ("acks", "checked", "dests", "mark", "post", "recorded_as", "runs", "sender_state")

    def __init__(self, post: MailPost, runs: RunTable) -> None:
        self.post, self.runs = post, runs
        self.acks: list[MailAck] = []
        self.dests: dict[str, Destination] = {}
        self.checked: tuple[str, int] | None = None
        self.sender_state: RunState | None = None
        self.recorded_as: list[Mail] = []  # named by a sender's record (delivered), here not
        self.mark = 0  # the post's mails before the one being sent

    def refused(self, msg: SendMail, exc: Exception) -> None:
        """``msg``, whose sending raised (a bug: ``isolated``), is not recorded nor
        delivered (what it put in the post and in inboxes is taken out) and its sender is
        told so, with the error."""
        taken, records = self.post.records[self.mark :], self.post.records
        del records[self.mark :]
        for mail in taken:  # (a topic's: those put in their recipients' inboxes, out again)
            held = self.runs.get(mail.recipient)
            if held is not None:
                held.inbox.pop(mail.mail_id, None)
        self.acks.append(MailAck(request_id=msg.request_id, error=failure_reason(exc)))
