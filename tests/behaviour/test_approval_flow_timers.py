"""An approval asked of the parent whose mail could not be delivered is refused at once, and
its timer goes with it: left running, its firing refused whichever call waited under that
tool_use id, so a model repeating ids had a later turn's approval refused early with a false
"the parent did not answer the request within N s".

``ParentApprovalFlow`` with the real ``ToolCalls`` and a port that keeps what it is told (the
flow's boundary with its actor): the mail's failure is a ``MailAck`` with an error, the timer's
firing the ``Wake`` key the flow armed. (End to end the case needs a parent that can be
mailed in one turn and not in the next, and a stale timer firing inside the window before the
parent's answer: only wall-clock margins reach it.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog

from subagents.behaviour.approval_flow import ParentApprovalFlow
from subagents.behaviour.port import AgentEnv
from subagents.behaviour.tool_calls import ToolCalls
from subagents.definitions.spec import AgentSpec
from subagents.messages import MailAck, RunRecord, SendMail, ToolUseBlock
from subagents.models.scripted import ScriptedModel
from subagents.tools.bash import BASH
from subagents.tools.workspace import Workspace

CHILD = AgentSpec(name="child", description="d", prompt="p")


class _Port:
    """What the flow reads of its run and tells its actor: mail sent, timers armed."""

    def __init__(self) -> None:
        self.record = RunRecord(
            run_id="r1", agent="child", task="t", root_run_id="r0", parent_run_id="r0"
        )
        self.spec = CHILD
        self.log: Any = structlog.get_logger("test")
        self.deadline = time.monotonic() + 3600.0
        self.sent: list[SendMail] = []
        self.timers: set[str] = set()

    def send_mail(self, msg: SendMail) -> None:
        self.sent.append(msg)

    def wake_after(self, key: str, seconds: float) -> None:
        self.timers.add(key)

    def cancel_wake(self, key: str) -> None:
        self.timers.discard(key)


def _flow(tmp_path: Path) -> tuple[ParentApprovalFlow, _Port, list[tuple[str, str, bool]]]:
    env = AgentEnv(model=ScriptedModel({}), agents=lambda: [CHILD], workspace=Workspace(tmp_path))
    port = _Port()
    answers: list[tuple[str, str, bool]] = []
    calls = ToolCalls(env, port)  # type: ignore[arg-type]
    flow = ParentApprovalFlow(
        env,
        port,  # type: ignore[arg-type]
        calls,
        lambda use_id, content, is_error: answers.append((use_id, content, is_error)),
        lambda kind, message: None,
    )
    return flow, port, answers


def test_a_failed_approval_mail_takes_its_timer_and_spares_a_later_turns_call(
    tmp_path: Path,
) -> None:
    flow, port, answers = _flow(tmp_path)
    use = ToolUseBlock(id="toolu_same", name="Bash", input={"command": "true"})
    flow.ask(use, BASH, "asked", step=1)
    first = port.sent[-1].request_id
    assert port.timers == {first}
    flow.mailed(MailAck(request_id=first, error="run r0 has already ended (completed)"))
    assert answers[-1][0] == "toolu_same" and "could not reach the parent" in answers[-1][1]
    assert port.timers == set()  # the refused call's timer went with it

    flow.ask(use, BASH, "asked", step=2)  # the model repeats the id in a later turn
    second = port.sent[-1].request_id
    assert second != first and port.timers == {second}
    flow.timed_out(first)  # had the first timer fired after all (a Wake already queued)
    assert len(answers) == 1 and flow.waiting  # the later call still waits for its parent
    flow.mailed(MailAck(request_id=first, error="late"))  # nor does an old ack touch it
    assert len(answers) == 1 and flow.waiting

    flow.timed_out(second)
    assert len(answers) == 2 and not flow.waiting
    assert "did not answer the request within" in answers[-1][1]
