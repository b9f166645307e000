"""SupervisorRequests: what a Runtime asks its supervisor, one plain-data message per call.

Why apart from the Runtime: every call that changes or reads the supervisor's state goes the
same way: two checks (the runtime is open; the caller is not the supervisor's own thread,
which would wait on itself), one message asked with a timeout, and the reply's ``error``
turned into the exception the caller sees (``LookupError``; ``RuntimeClosed`` once the actor
is gone). Here that way is written once; the Runtime keeps the public methods.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any, get_args

from subagents.actors.supervisor_client import TAKEN_GRACE, ActorGone, AskOverdue, AskRevoked
from subagents.logs import get_logger
from subagents.messages import (
    EXTERNAL_SENDER,
    Inspect,
    MailAck,
    Restore,
    RestoreReport,
    RunProgress,
    RunRecord,
    SendMail,
    StatusOf,
    StopReply,
    StopRequest,
    StopRequested,
    StopScope,
    SupervisorStats,
    TreeRecords,
    new_id,
)
from subagents.runtime._services import Services
from subagents.runtime._terminal import terminal_state
from subagents.store.base import RunStore, StoreError
from subagents.supervision.limits import Limits
from subagents.supervision.requests import mail_problem, refuse_unkeepable_id

RESTORE_TIMEOUT_S = 30.0
"""How long a runtime's restore waits for the supervisor to take it (``restore``)."""

SEND_TIMEOUT_S = 30.0
"""How long ``Runtime.send`` waits for the supervisor to take its mail: one not taken by then
is withdrawn (never delivered); one taken is waited for to its answer (``ask_claimed``)."""

log = get_logger("subagents.runtime")


class RuntimeClosed(RuntimeError):
    """The runtime was closed; it starts nothing more."""


class SupervisorRequests:
    """The asks of one runtime to the supervisor ``hosting`` started."""

    def __init__(self, hosting: Services, limits: Limits, store: RunStore | None = None) -> None:
        self.hosting = hosting
        self.limits = limits
        self.store = store
        """The runtime's store, as its messages name it to a terminal (``terminal_state``)."""
        self.closed = False
        self.send_timeout = SEND_TIMEOUT_S
        """How long ``send`` waits for the supervisor to take its mail (tests make it short)."""
        """Set by ``Runtime.close``: from then on every call raises ``RuntimeClosed``."""

    def check_open(self) -> None:
        if self.closed:
            raise RuntimeClosed("the runtime is closed")

    def on_supervisor(self) -> bool:
        """Whether the caller is the supervisor's own thread (an event subscriber)."""
        return threading.current_thread() is self.hosting.supervisor_thread

    def check_caller(self) -> None:
        if threading.current_thread() is self.hosting.supervisor_thread:
            raise RuntimeError(
                "Runtime methods cannot be called from an event subscriber: subscribers run on"
                " the supervisor's thread, which would wait on itself; hand the work to another"
                " thread (a queue, an executor)"
            )

    def check(self) -> None:
        """Both checks, as a wait and a root spawn make them (in one frame: every spawn's)."""
        if self.closed:
            raise RuntimeClosed("the runtime is closed")
        if threading.current_thread() is self.hosting.supervisor_thread:
            self.check_caller()  # (raises it)

    def ask(self, message: Any, timeout: float = 30.0) -> Any:
        """The supervisor's reply to ``message`` (``timeout`` seconds at most)."""
        self.check_caller()
        supervisor = self.hosting.supervisor
        if supervisor is None:
            raise RuntimeClosed("the runtime is closed")
        try:
            return supervisor.ask(message, timeout=timeout)
        except ActorGone:
            raise RuntimeClosed("the runtime is closed") from None

    def ask_claimed(self, message: Any, timeout: float, grace: float) -> Any:
        """As ``ask``, for a request that starts runs: one the supervisor had not taken
        when ``timeout`` ran out is withdrawn, nothing of it done (``AskRevoked``, a
        ``TimeoutError``); one it took is waited for to its answer, up to ``grace`` more
        (``AskOverdue``, a ``TimeoutError``: it may still be done; ``SupervisorClient.
        ask_claimed``)."""
        self.check_caller()
        supervisor = self.hosting.supervisor
        if supervisor is None:
            raise RuntimeClosed("the runtime is closed")
        try:
            return supervisor.ask_claimed(message, timeout=timeout, grace=grace)
        except ActorGone:
            raise RuntimeClosed("the runtime is closed") from None

    def restore(
        self,
        roots: str | Iterable[str] | None,
        timeout: float = RESTORE_TIMEOUT_S,
        grace: float = TAKEN_GRACE,
    ) -> RestoreReport:
        """Take up the orphaned runs of the store (``roots``: these root trees; None: all).

        Asked with a claim (``ask_claimed``), as every request that starts runs: a restore
        the supervisor had not taken within ``timeout`` is withdrawn, nothing taken up (the
        runs stay orphaned: safe to restore again); one it took is waited for to its answer
        (up to ``grace`` more). One whose writes the store refused (``StoreError``) took
        nothing up either, and says so (the supervisor halted: the store failed).
        Unclaimed, a restore that timed out was decided later: its runs taken up by a
        runtime whose start had failed, and ended by its close."""
        wanted = None if roots is None else frozenset([roots] if isinstance(roots, str) else roots)
        which = "orphaned runs" if wanted is None else f"orphaned trees {', '.join(sorted(wanted))}"
        try:
            report: RestoreReport = self.ask_claimed(
                Restore(roots=wanted), timeout=timeout, grace=grace
            )
        except AskRevoked as exc:  # withdrawn: nothing taken up, safe to restore again
            raise TimeoutError(
                f"restore of the store's {which}: {exc}; no run was taken up: they stay"
                " orphaned in the store, and restoring again (a new Runtime, `subagents"
                " resume`) is safe"
            ) from None
        except AskOverdue as exc:  # taken, not answered: it may still take runs up
            state = terminal_state(self.store)  # the store the terminal must read
            listing = "" if state is None else f" (`subagents ps --all{state}`)"
            raise TimeoutError(
                f"restore of the store's {which}: {exc}; it may still take up those runs"
                " (and this runtime, closing as its start failed, end them cancelled): see"
                f" which{listing} before restoring again"
            ) from None
        except StoreError as exc:  # its takeover rolled back (``Recovery.untake``)
            raise StoreError(
                f"restore of the store's {which} failed: {exc}; no run was taken up: they stay"
                " orphaned in the store, and restoring again (a new Runtime, `subagents"
                " resume`) takes them up once the store takes writes"
            ) from exc
        if report.orphans:
            log.info(
                "restored root runs have no caller; use Runtime.attach(run_id)",
                orphans=report.orphans,
            )
        return report

    def stop(self, run_id: str, scope: StopScope = "tree") -> tuple[str, ...]:
        """``Runtime.stop``."""
        self.check_open()
        refuse_unkeepable_id(run_id)
        if scope not in get_args(StopScope):
            raise ValueError(f"scope must be 'tree' or 'turn', got {scope!r}")
        request = StopRequest(request_id=new_id("x"), run_id=run_id, scope=scope)
        reply: StopReply = self.ask(request)
        if reply.error is not None:
            raise LookupError(reply.error)
        return reply.stopped

    def stop_all(self, requester: str, reason: str) -> tuple[str, ...]:
        """``Runtime.stop_all``: the arguments checked, one ``StopRequested``."""
        self.check_open()
        if not isinstance(requester, str) or not requester:
            raise TypeError(f"requester must be a run id or {EXTERNAL_SENDER!r}, got {requester!r}")
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a string, got {type(reason).__name__}")
        request = StopRequested(request_id=new_id("x"), requested_by=requester, reason=reason)
        reply: StopReply = self.ask(request)
        if reply.error is not None:
            raise LookupError(reply.error)
        return reply.stopped

    def send(self, run_id: str, text: str, reply_to: str | None) -> str:
        """``Runtime.send``: the mail id. ``ValueError`` for a mail wrong in itself (its
        types, its encoding, over ``Limits.max_text_chars``), checked here: the supervisor's
        refusal is a ``LookupError``, the promise for a dead or unknown run."""
        self.check_open()
        mail = SendMail(
            request_id=new_id("q"),
            sender=EXTERNAL_SENDER,
            to=run_id,
            content=text,
            reply_to=reply_to,
        )
        problem = mail_problem(mail, self.limits)
        if problem is not None:
            raise ValueError(problem)
        try:
            ack: MailAck = self.ask_claimed(mail, timeout=self.send_timeout, grace=TAKEN_GRACE)
        except AskRevoked as exc:  # withdrawn: never delivered, safe to send again
            raise TimeoutError(f"send to {run_id}: {exc}; the mail was not sent") from None
        except AskOverdue as exc:  # taken, not answered: it may still be delivered
            raise TimeoutError(
                f"send to {run_id}: {exc}; the mail may still be delivered: look for it"
                f" (`subagents log {run_id}`, events) before sending it again"
            ) from None
        if ack.error is not None:
            raise LookupError(ack.error)
        assert ack.mail_id is not None
        return ack.mail_id

    def held(self, run_id: str) -> tuple[RunRecord, ...]:
        """The supervisor's records of the live tree under ``run_id`` (``Runtime.usage``)."""
        self.check_open()
        refuse_unkeepable_id(run_id)
        records: tuple[RunRecord, ...] = self.ask(TreeRecords(run_id=run_id))
        return records

    def status(self, run_id: str) -> RunProgress:
        """``Runtime.status``: ``LookupError`` when the store has no such run."""
        self.check_open()
        refuse_unkeepable_id(run_id)
        try:
            progress: RunProgress = self.ask(StatusOf(run_id=run_id))
        except ValueError as exc:
            raise LookupError(str(exc)) from None
        return progress

    def stats(self, run_id: str | None) -> SupervisorStats:
        """``Runtime.stats``."""
        self.check_open()
        refuse_unkeepable_id(run_id)
        stats: SupervisorStats = self.ask(Inspect(run_id=run_id))
        return stats
