"""One validation of what a run is asked to do, whoever asks: ``Runtime.run`` and
``Runtime.spawn``, the command line, a function agent's ``ctx.spawn``, an LLM's spawn tool.

Why one place: the Python API and the command line used to check different things (a
timeout above the maximum was an error on the command line and silently capped in Python; an
empty task was refused by one and accepted by the other). Every entry point now calls
``request_problem`` and refuses with its answer, so one request gets one answer everywhere.

Nothing checks a msgspec Struct's field types when it is built in code, so the types are
checked here too, naming the field, rather than failing deep in the supervisor. The size of
texts (a task, a mail, a result) is capped by ``Limits.max_text_chars``: a 50 MiB task was
accepted and stored (three times over) before.
"""

from __future__ import annotations

import math
from typing import Any

from subagents.messages import SendMail, SpawnRequest
from subagents.supervision.limits import Limits


def text_problem(what: str, text: str, cap: int) -> str | None:
    """Why ``text`` (a task, a mail, a result) is too large, naming its size and the cap."""
    if len(text) <= cap:
        return None
    return (
        f"{what} is {len(text):,} characters, over the cap of {cap:,}"
        " (Limits.max_text_chars; raise it, or hand the text over as a file)"
    )


def request_problem(req: SpawnRequest, limits: Limits) -> str | None:
    """Why a spawn request cannot be admitted as asked, or None. Checks the request alone
    (types, an empty task, sizes, the timeout against the maximum); what depends on the
    runtime's state (the agent, depth, budgets, queue) is the supervisor's to judge."""
    if not isinstance(req.agent, str) or not isinstance(req.task, str):
        return (
            f"agent and task must be strings, got {type(req.agent).__name__} and"
            f" {type(req.task).__name__}"
        )
    if not req.agent.strip():
        return "no agent given (agent is empty)"
    if not req.task.strip():
        return f"the task for {req.agent!r} is empty: say what the agent should do"
    for name in ("context", "label", "model"):
        value = getattr(req, name)
        if value is not None and not isinstance(value, str):
            return f"{name} must be a string, got {value!r}"
    if req.cleanup is not None and req.cleanup not in ("keep", "delete"):
        return f"cleanup must be 'keep' or 'delete', got {req.cleanup!r}"
    cap = limits.max_text_chars
    problem = text_problem("the task", req.task, cap)
    if problem is None and req.context is not None:
        problem = text_problem("the context", req.context, cap)
    if problem is not None:
        return problem
    if req.token_budget is not None and (
        isinstance(req.token_budget, bool) or not isinstance(req.token_budget, int | float)
    ):
        return f"token_budget must be a number, got {req.token_budget!r}"
    return timeout_problem(req.timeout, limits)


def timeout_problem(timeout: Any, limits: Limits) -> str | None:
    """Why a requested timeout cannot be used: not a positive finite number of seconds, or
    above the maximum (an error, never silently capped: the caller asked for more time than
    the runtime allows, and should know it will not get it)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        return f"timeout must be a number of seconds, got {timeout!r}"
    if not math.isfinite(timeout) or timeout <= 0:
        return f"timeout must be a positive number of seconds, got {timeout!r}"
    if timeout > limits.max_timeout_s:
        return (
            f"timeout {timeout:g} s is above the maximum of {limits.max_timeout_s:g} s"
            " (Limits.max_timeout_s)"
        )
    return None


def mail_problem(msg: SendMail, limits: Limits) -> str | None:
    """Why a mail cannot be sent as written (its fields' types, its size), or None: that
    mail fails, not the others sent with it."""
    if not isinstance(msg.to, str) or not isinstance(msg.content, str):
        return (
            f"to and content must be strings, got {type(msg.to).__name__} and"
            f" {type(msg.content).__name__}"
        )
    if msg.reply_to is not None and not isinstance(msg.reply_to, str):
        return f"reply_to must be a string, got {msg.reply_to!r}"
    return text_problem("the mail", msg.content, limits.max_text_chars)
