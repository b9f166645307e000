"""subagents: an actor-model runtime for LLM subagents with mailboxes.

The names a program needs are importable from here; each is loaded on first use so that
``import subagents`` stays cheap (``subagents --version`` imports nothing else).

Logging is quiet by default: an embedding program that configured structlog keeps its
configuration; otherwise log lines go to stderr at WARNING (SUBAGENTS_LOG_LEVEL /
SUBAGENTS_LOG_JSON). Each sub-package that logs installs that default when it is first
imported (``subagents.logs.ensure_configured``), so that importing structlog is paid only by
what uses it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Runtime": "subagents.runtime",
    "RunHandle": "subagents.runtime",
    "RunResult": "subagents.runtime",
    "RuntimeClosed": "subagents.runtime",
    "AdmissionError": "subagents.supervision.core",
    "Limits": "subagents.supervision.limits",
    "AgentSpec": "subagents.definitions.spec",
    "FunctionAgent": "subagents.behaviour.function",
    "AgentContext": "subagents.behaviour.function",
    "Tool": "subagents.behaviour.tools",
    "ToolError": "subagents.behaviour.tools",
    "ScriptedModel": "subagents.models.scripted",
    "ModelError": "subagents.models.base",
    "Outcome": "subagents.messages",
    "RunStatus": "subagents.messages",
    "RunRecord": "subagents.messages",
    "Event": "subagents.messages",
    "EventKind": "subagents.messages",
    "Usage": "subagents.messages",
    "MemoryStore": "subagents.store.memory",
    "SQLiteStore": "subagents.store.sqlite",
}

__all__ = [
    "AdmissionError",
    "AgentContext",
    "AgentSpec",
    "Event",
    "EventKind",
    "FunctionAgent",
    "Limits",
    "MemoryStore",
    "ModelError",
    "Outcome",
    "RunHandle",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "Runtime",
    "RuntimeClosed",
    "SQLiteStore",
    "ScriptedModel",
    "Tool",
    "ToolError",
    "Usage",
]

if TYPE_CHECKING:
    from subagents.behaviour.function import AgentContext, FunctionAgent
    from subagents.behaviour.tools import Tool, ToolError
    from subagents.definitions.spec import AgentSpec
    from subagents.messages import Event, EventKind, Outcome, RunRecord, RunStatus, Usage
    from subagents.models.base import ModelError
    from subagents.models.scripted import ScriptedModel
    from subagents.runtime import RunHandle, RunResult, Runtime, RuntimeClosed
    from subagents.store.memory import MemoryStore
    from subagents.store.sqlite import SQLiteStore
    from subagents.supervision.core import AdmissionError
    from subagents.supervision.limits import Limits


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
