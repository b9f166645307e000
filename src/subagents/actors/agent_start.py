"""What an agent actor is started with: the behaviour it hosts (``Behaviour``, made by a
``BehaviourFactory`` from its port), the parts every agent actor of a runtime shares
(``AgentKit``), and the fields of its ``StartRun`` read from it (``Started``).

Why apart from ``actors/agent.py``: these are the actor's inputs, the same for a thread-backed
and a pooled agent actor, and read by the ``Effector`` that starts them; the actor's own
module keeps its handling and its port.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import pykka

from subagents.actors.mail_desk import MailDesk
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.behaviour.port import AgentPort
from subagents.definitions.spec import AgentSpec
from subagents.messages import Checkpoint, Mail, RunRecord
from subagents.supervision.admission_checks import Standing
from subagents.supervision.effects import StartRun


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


class AgentKit(NamedTuple):
    """What every agent actor of one runtime is started with, the same for each (made once
    by its ``Effector``): where it reports, its timers, its behaviour by definition, the
    thread pool its loop runs on (None: a thread of its own, or a dispatcher's), and the
    desk for mail taken straight to its recipients (None: every mail goes by the
    supervisor; ``actors/mail_desk.py``)."""

    supervisor: pykka.ActorRef[Any]
    timer: TimerService
    behaviour_for: Callable[[AgentSpec], BehaviourFactory]
    pool: ThreadPool | None = None
    mail: MailDesk | None = None


class Started:
    """The fields of the ``StartRun`` a run's actor was started with. The three a run reads
    at nearly every step (``record``, ``spec``, ``attempt``) are attributes of the actor's
    own, copied once by its constructor: as properties each read was a Python call, about
    twenty per LLM run and two per trivial one (benchmarks/_llm_spec_work.py); the rest are
    read from the ``StartRun`` (few reads), so a live actor's attributes stay few enough for
    CPython to share their keys (see ``AgentActor``'s class defaults)."""

    _start: StartRun
    record: RunRecord
    spec: AgentSpec
    attempt: int

    @property
    def standing(self) -> Standing:
        return self._start.standing

    @property
    def deadline(self) -> float:
        return self._start.deadline
