"""What makes each LLM run's behaviour, and whether a run's start blocks.

Apart from ``llm.py``: the runtime and the effector ask these questions of a run before it
exists (from its checkpoint alone); the conversation itself never does.
"""

from __future__ import annotations

from subagents.behaviour.fan_out_tool import FAN_OUT
from subagents.behaviour.llm import LLMBehaviour
from subagents.behaviour.port import AgentEnv, AgentPort
from subagents.behaviour.tools import RUNTIME_TOOLS, SEND, SPAWN, STOP, TASK, WAIT
from subagents.messages import Checkpoint, ToolUseBlock

__all__ = ["ANSWERED_LATER", "LLMFactory"]


ANSWERED_LATER = frozenset({SPAWN, TASK, FAN_OUT, SEND, STOP, WAIT})
"""The runtime's tools whose call is handed to the supervisor (or waits for mail) and answered
by a later message: a run restarted with one left makes no model call until it is answered.
The runtime's other tools are answered at once, in the handling that dispatches them."""


class LLMFactory:
    """What makes each run's ``LLMBehaviour`` (``factory(port)``), for a runtime's ``env``.

    ``blocks_at_start``: whether a run's start blocks (its model call, or a tool call left
    to run: each waits, and the dispatcher hands its thread's work to another:
    ``subagents.blocking``). The effector asks it to have the threads a wave of such starts
    needs ready before it starts them (``Dispatcher.ready``)."""

    __slots__ = ("env",)

    def __init__(self, env: AgentEnv) -> None:
        self.env = env

    @staticmethod
    def blocks_at_start(checkpoint: Checkpoint | None) -> bool:
        """Whether a run started from ``checkpoint`` (None: a fresh run) blocks as it starts
        (``LLMBehaviour.start``), with nothing it waits for in between: a fresh run and a
        continued one (its conversation ends with the user's text) make their model call; a
        restarted one whose last turn's tool calls are all answered makes it next (its
        ``Continue``); one with a call of a user, built-in or MCP tool left to run runs it
        first, and every such run says it blocks (``ToolCalls._run_hooked``:
        ``about_to_block``), as a model call does. A restarted run that had ended does not
        (it finishes at once), nor one whose calls left are the runtime's own and one of
        them is answered later (``ANSWERED_LATER``: a spawn, a mail, a wait for mail, handed
        to the supervisor; a spare started for it idled until the pool dropped it); those
        answered at once (``check_mailbox``, ``load_skill``...) are as answered. (A user
        tool's call that its permissions send to an approval does not block either: counted,
        its spare may idle.)"""
        if checkpoint is None or not checkpoint.messages:
            return True
        last = checkpoint.messages[-1]
        if last.role != "assistant":
            return True
        uses = [b for b in last.content if isinstance(b, ToolUseBlock)]
        if not uses:
            return False
        answered = {r.tool_use_id for r in checkpoint.answered}
        left = [u.name for u in uses if u.id not in answered]
        if any(name not in RUNTIME_TOOLS for name in left):
            return True  # a tool's run: it says it blocks
        return not any(name in ANSWERED_LATER for name in left)  # else answered at once

    def __call__(self, port: AgentPort) -> LLMBehaviour:
        return LLMBehaviour(self.env, port)
