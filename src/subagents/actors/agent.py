"""AgentActor: one pykka actor per running run, hosting its behaviour.

Thin on purpose: it implements the AgentPort a behaviour talks to (telling the supervisor, the
timer service or itself) and turns anything the behaviour raises into a failed run, so a bug
or a crashing tool never hangs a requester or leaks a thread.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgspec
import pykka
import structlog

from subagents.actors.inbox import FastInboxActor
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.behaviour.port import AgentPort
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Checkpoint,
    Continue,
    Mail,
    MailRead,
    RunFinished,
    RunRecord,
    SendMail,
    SpawnRequest,
    StepTaken,
    StopRequest,
    ToolAnswered,
    ToolCalled,
    WaitingChanged,
    Wake,
)

log = structlog.get_logger("subagents.agent")


class Behaviour(Protocol):
    def start(
        self,
        checkpoint: Checkpoint | None,
        pending_mail: tuple[Mail, ...],
        recovered: tuple[Any, ...] = (),
    ) -> None: ...
    def on_message(self, message: Any) -> None: ...
    def unread_mail(self) -> tuple[str, ...]: ...


BehaviourFactory = Callable[[AgentPort], Behaviour]


def _summary(arguments: Mapping[str, Any], limit: int = 300) -> dict[str, Any]:
    """Tool arguments cut short for events and logs."""
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str) and len(value) > limit:
            value = value[:limit] + "…"
        out[key] = value
    return out


class AgentActor(FastInboxActor):
    """Runs one run's behaviour; every message it gets goes to the behaviour."""

    use_daemon_thread = True

    def __init__(
        self,
        *,
        record: RunRecord,
        spec: AgentSpec,
        deadline: float,
        cancel: threading.Event,
        supervisor: pykka.ActorRef[Any],
        timer: TimerService,
        behaviour: BehaviourFactory,
        checkpoint: Checkpoint | None = None,
        pending_mail: tuple[Mail, ...] = (),
        recovered: tuple[Any, ...] = (),
        attempt: int = 1,
        pool: ThreadPool | None = None,
    ) -> None:
        super().__init__()
        self._pool = pool
        self.attempt = attempt
        self.record = record
        self.spec = spec
        self.deadline = deadline
        self.cancel = cancel
        self.supervisor = supervisor
        self.timer = timer
        self._factory = behaviour
        self._checkpoint = checkpoint
        self._pending_mail = pending_mail
        self._recovered = recovered
        self._wakes: set[str] = set()
        self._ended = False
        self._log: Any = None
        self.behaviour: Behaviour | None = None

    @property
    def log(self) -> Any:
        """This run's logger, its ids bound. Bound on first use, not in the constructor:
        most runs never log, and binding costs ~5 us per run on the spawn path."""
        if self._log is None:
            r = self.record
            self._log = log.bind(
                run_id=r.run_id,
                parent_run_id=r.parent_run_id,
                root_run_id=r.root_run_id,
                agent=r.agent,
                depth=r.depth,
            )
        return self._log

    # ---- pykka hooks -------------------------------------------------------------------------

    def _start_actor_loop(self) -> None:
        """On a pooled thread when there is a pool (pykka's hook for actor types that run
        their loop elsewhere): the supervisor, which starts every run, then does not wait
        ~90 us for a new thread to come up."""
        if self._pool is None:
            super()._start_actor_loop()
        else:
            self._pool.run(self._actor_loop)

    def on_start(self) -> None:
        self._guard(self._begin)

    def _begin(self) -> None:
        self.behaviour = self._factory(self)
        self.behaviour.start(self._checkpoint, self._pending_mail, self._recovered)

    def on_receive(self, message: Any) -> None:
        if self._ended or self.cancel.is_set() or self.behaviour is None:
            return
        behaviour = self.behaviour
        self._guard(lambda: behaviour.on_message(message))

    def on_stop(self) -> None:
        for key in self._wakes:
            self.timer.cancel(("wake", self.record.run_id, key))

    def _guard(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:
            self.log.error("agent crashed", error=repr(exc), traceback=traceback.format_exc())
            self.fail("crash", f"{type(exc).__name__}: {exc}")

    # ---- AgentPort ---------------------------------------------------------------------------

    # Every report carries this start's ``attempt``: the supervisor ignores reports from an
    # earlier start of a restarted run, whose actor may still be finishing a call.

    def request_spawn(self, req: SpawnRequest) -> None:
        self.supervisor.tell(msgspec.structs.replace(req, attempt=self.attempt))

    def send_mail(self, msg: SendMail) -> None:
        self.supervisor.tell(msgspec.structs.replace(msg, attempt=self.attempt))

    def request_stop(self, req: StopRequest) -> None:
        self.supervisor.tell(msgspec.structs.replace(req, attempt=self.attempt))

    def report_step(self, step: StepTaken) -> None:
        # Asked, not told: the step is recorded (and a budget stop, if it went over, has set
        # ``cancel``) before this agent can start its next model call. That is what bounds a
        # budget overrun to one model call. The supervisor never asks agents: no deadlock.
        with contextlib.suppress(pykka.ActorDeadError, pykka.Timeout):
            self.supervisor.ask(msgspec.structs.replace(step, attempt=self.attempt), timeout=30.0)

    def report_answer(self, answer: ToolAnswered) -> None:
        self.supervisor.tell(msgspec.structs.replace(answer, attempt=self.attempt))

    def report_tool_call(self, tool: str, arguments: Mapping[str, Any]) -> None:
        self.supervisor.tell(
            ToolCalled(
                run_id=self.record.run_id,
                tool=tool,
                input=_summary(arguments),
                attempt=self.attempt,
            )
        )

    def mail_read(self, mail_ids: tuple[str, ...]) -> None:
        self.supervisor.tell(
            MailRead(run_id=self.record.run_id, mail_ids=mail_ids, attempt=self.attempt)
        )

    def set_waiting(self, waiting: bool) -> None:
        self.supervisor.tell(
            WaitingChanged(run_id=self.record.run_id, waiting=waiting, attempt=self.attempt)
        )

    def wake_after(self, key: str, seconds: float) -> None:
        ref = self.actor_ref
        self._wakes.add(key)

        def wake() -> None:
            with contextlib.suppress(pykka.ActorDeadError):
                ref.tell(Wake(key=key))

        self.timer.schedule_in(("wake", self.record.run_id, key), seconds, wake)

    def cancel_wake(self, key: str) -> None:
        self._wakes.discard(key)
        self.timer.cancel(("wake", self.record.run_id, key))

    def continue_later(self) -> None:
        self.actor_ref.tell(Continue())

    def finish(self, result: str) -> None:
        self._end(
            RunFinished(
                run_id=self.record.run_id,
                result=result,
                unread_mail=self._unread(),
                attempt=self.attempt,
            )
        )

    def fail(self, kind: str, message: str) -> None:
        self._end(
            RunFinished(
                run_id=self.record.run_id,
                error_kind=kind,
                error=message,
                unread_mail=self._unread(),
                attempt=self.attempt,
            )
        )

    def _unread(self) -> tuple[str, ...]:
        try:
            return self.behaviour.unread_mail() if self.behaviour is not None else ()
        except Exception:
            return ()

    def _end(self, report: RunFinished) -> None:
        if self._ended:
            return
        self._ended = True
        if not self.cancel.is_set():  # a stopped run's ending was decided by the supervisor
            self.supervisor.tell(report)
        self.stop()
