"""subagents: an actor-model runtime for LLM subagents with mailboxes.

Every name a program needs is importable from here: the runtime, and every type a public call
takes, returns or raises (tests/runtime/test_public_api.py walks the API for the next one
forgotten; an exception class that never leaves the package is listed there, with why).
Each is loaded on first use, so that ``import subagents`` stays cheap (``subagents
--version`` imports nothing else).

Importing configures no logging. The command line configures structlog; so does a
``Runtime``, and the first log line of any part of the package, unless the application
configured structlog first: then log lines go to stderr at WARNING (``SUBAGENTS_LOG_LEVEL``,
``SUBAGENTS_LOG_JSON``), see ``subagents.logs``.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    # the runtime
    "Runtime": "subagents.runtime",
    "RunHandle": "subagents.runtime",
    "RuntimeClosed": "subagents.runtime",
    "SpawnOptions": "subagents.runtime",
    "StoreInReach": "subagents.runtime",
    "AdmissionError": "subagents.supervision.admission",
    "Limits": "subagents.supervision.limits",
    "LimitError": "subagents.supervision.limits",
    "ClusterError": "subagents.cluster.connect",
    # agents
    "AgentSpec": "subagents.definitions.spec",
    "FunctionAgent": "subagents.behaviour.function",
    "AgentContext": "subagents.behaviour.function",
    "Pending": "subagents.behaviour.function",
    "ReplayDiverged": "subagents.behaviour.function",
    "BadAwait": "subagents.behaviour.failures",
    "DefinitionError": "subagents.definitions.errors",
    "SpawnRefused": "subagents.behaviour.function",
    "MailError": "subagents.behaviour.function",
    "StopError": "subagents.behaviour.function",
    "Tool": "subagents.tools.base",
    "ToolError": "subagents.tools.base",
    "ToolResult": "subagents.tools.base",
    "ToolContext": "subagents.tools.context",
    "Workspace": "subagents.tools.workspace",
    "SealedFiles": "subagents.tools.sealed",
    "Permissions": "subagents.tools.permissions",
    "Rule": "subagents.tools.rules",
    "RuleError": "subagents.tools.rules",
    "McpConfigError": "subagents.mcp.config",
    "Sandbox": "subagents.tools.sandbox",
    "RunSandbox": "subagents.tools.sandbox",
    "SandboxRefused": "subagents.tools.sandbox",
    "ApprovalRequest": "subagents.tools.approval",
    "Approval": "subagents.tools.approval",
    "SkillIndex": "subagents.definitions.skills",
    "SkillInfo": "subagents.definitions.skills",
    # models
    "Model": "subagents.models.base",
    "ModelError": "subagents.models.base",
    "CancelSignal": "subagents.models.base",
    "StreamSink": "subagents.models.base",
    "StreamingModel": "subagents.models.base",
    "TransientError": "subagents.models.retry",
    "Price": "subagents.models.names",
    "ToolSchema": "subagents.messages",
    "ToolUseBlock": "subagents.messages",
    "ModelRequest": "subagents.messages",
    "ModelResponse": "subagents.messages",
    "ScriptedModel": "subagents.models.scripted",
    "Turn": "subagents.models.script",
    "ScriptError": "subagents.models.script",
    "AnthropicModel": "subagents.models.anthropic",
    "RetryPolicy": "subagents.models.retry",
    # runs, events, mail, views
    "Outcome": "subagents.messages",
    "RunStatus": "subagents.messages",
    "RunRecord": "subagents.messages",
    "Event": "subagents.messages",
    "EventKind": "subagents.messages",
    "StoredEvent": "subagents.messages",
    "Usage": "subagents.messages",
    "Mail": "subagents.messages",
    "MailState": "subagents.messages",
    "TreeNode": "subagents.messages",
    "TreeUsage": "subagents.messages",
    "RunUsage": "subagents.messages",
    "RunProgress": "subagents.messages",
    "Preview": "subagents.messages",
    "EXTERNAL_SENDER": "subagents.messages",
    "RestoreReport": "subagents.messages",
    "SupervisorStats": "subagents.messages",
    "Totals": "subagents.supervision.totals",
    "Synthesis": "subagents.supervision.synthesis",
    "SynthesisError": "subagents.supervision.synthesis",
    # stores
    "RunStore": "subagents.store.base",
    "StoreError": "subagents.store.base",
    "AlreadyEnded": "subagents.store.base",
    "DamagedRow": "subagents.store.base",
    "Fenced": "subagents.store.base",
    "StoreBusy": "subagents.store.base",
    "UnsureWrite": "subagents.store.base",
    "MailRecording": "subagents.store.base",
    "MemoryStore": "subagents.store.memory",
    "SQLiteStore": "subagents.store.sqlite",
    "Lease": "subagents.messages",
    "Command": "subagents.messages",
    "Checkpoint": "subagents.messages",
    "CheckpointDelta": "subagents.messages",
    "JournalEntry": "subagents.messages",
    "Subscription": "subagents.messages",
    "SweepReport": "subagents.store.sweep",
    # durable approvals: asks kept in the store, answered from any process
    "ApprovalRecord": "subagents.messages",
    "ApprovalRefused": "subagents.store.approvals",
    "pending_approvals": "subagents.runtime",
    "answer_approval": "subagents.runtime",
}

_DEPRECATED = {"RunResult": "Outcome"}
"""Old names kept working for a while, with a DeprecationWarning naming the new one."""

__all__ = [
    "EXTERNAL_SENDER",
    "AdmissionError",
    "AgentContext",
    "AgentSpec",
    "AlreadyEnded",
    "AnthropicModel",
    "Approval",
    "ApprovalRecord",
    "ApprovalRefused",
    "ApprovalRequest",
    "BadAwait",
    "CancelSignal",
    "Checkpoint",
    "CheckpointDelta",
    "ClusterError",
    "Command",
    "DamagedRow",
    "DefinitionError",
    "Event",
    "EventKind",
    "Fenced",
    "FunctionAgent",
    "JournalEntry",
    "Lease",
    "LimitError",
    "Limits",
    "Mail",
    "MailError",
    "MailRecording",
    "MailState",
    "McpConfigError",
    "MemoryStore",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "Outcome",
    "Pending",
    "Permissions",
    "Preview",
    "Price",
    "ReplayDiverged",
    "RestoreReport",
    "RetryPolicy",
    "Rule",
    "RuleError",
    "RunHandle",
    "RunProgress",
    "RunRecord",
    "RunSandbox",
    "RunStatus",
    "RunStore",
    "RunUsage",
    "Runtime",
    "RuntimeClosed",
    "SQLiteStore",
    "Sandbox",
    "SandboxRefused",
    "ScriptError",
    "ScriptedModel",
    "SealedFiles",
    "SkillIndex",
    "SkillInfo",
    "SpawnOptions",
    "SpawnRefused",
    "StopError",
    "StoreBusy",
    "StoreError",
    "StoreInReach",
    "StoredEvent",
    "StreamSink",
    "StreamingModel",
    "Subscription",
    "SupervisorStats",
    "SweepReport",
    "Synthesis",
    "SynthesisError",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSchema",
    "ToolUseBlock",
    "Totals",
    "TransientError",
    "TreeNode",
    "TreeUsage",
    "Turn",
    "UnsureWrite",
    "Usage",
    "Workspace",
    "answer_approval",
    "pending_approvals",
]

if TYPE_CHECKING:
    from subagents.behaviour.failures import BadAwait
    from subagents.behaviour.function import (
        AgentContext,
        FunctionAgent,
        MailError,
        Pending,
        ReplayDiverged,
        SpawnRefused,
        StopError,
    )
    from subagents.cluster.connect import ClusterError
    from subagents.definitions.errors import DefinitionError
    from subagents.definitions.skills import SkillIndex, SkillInfo
    from subagents.definitions.spec import AgentSpec
    from subagents.mcp.config import McpConfigError
    from subagents.messages import (
        EXTERNAL_SENDER,
        ApprovalRecord,
        Checkpoint,
        CheckpointDelta,
        Command,
        Event,
        EventKind,
        JournalEntry,
        Lease,
        Mail,
        MailState,
        ModelRequest,
        ModelResponse,
        Outcome,
        Preview,
        RestoreReport,
        RunProgress,
        RunRecord,
        RunStatus,
        RunUsage,
        StoredEvent,
        Subscription,
        SupervisorStats,
        ToolSchema,
        ToolUseBlock,
        TreeNode,
        TreeUsage,
        Usage,
    )
    from subagents.models.anthropic import AnthropicModel
    from subagents.models.base import CancelSignal, Model, ModelError, StreamingModel, StreamSink
    from subagents.models.names import Price
    from subagents.models.retry import RetryPolicy, TransientError
    from subagents.models.script import ScriptError, Turn
    from subagents.models.scripted import ScriptedModel
    from subagents.runtime import (
        RunHandle,
        Runtime,
        RuntimeClosed,
        SpawnOptions,
        StoreInReach,
        answer_approval,
        pending_approvals,
    )
    from subagents.store.approvals import ApprovalRefused
    from subagents.store.base import (
        AlreadyEnded,
        DamagedRow,
        Fenced,
        MailRecording,
        RunStore,
        StoreBusy,
        StoreError,
        UnsureWrite,
    )
    from subagents.store.memory import MemoryStore
    from subagents.store.sqlite import SQLiteStore
    from subagents.store.sweep import SweepReport
    from subagents.supervision.admission import AdmissionError
    from subagents.supervision.limits import LimitError, Limits
    from subagents.supervision.synthesis import Synthesis, SynthesisError
    from subagents.supervision.totals import Totals
    from subagents.tools.approval import Approval, ApprovalRequest
    from subagents.tools.base import Tool, ToolError, ToolResult
    from subagents.tools.context import ToolContext
    from subagents.tools.permissions import Permissions
    from subagents.tools.rules import Rule, RuleError
    from subagents.tools.sandbox import RunSandbox, Sandbox, SandboxRefused
    from subagents.tools.sealed import SealedFiles
    from subagents.tools.workspace import Workspace


def __getattr__(name: str) -> Any:
    new = _DEPRECATED.get(name)
    if new is not None:
        warnings.warn(
            f"subagents.{name} is deprecated: it is {new}; use subagents.{new}",
            DeprecationWarning,
            stacklevel=2,
        )
        name = new
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'subagents' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return [*globals(), *__all__]
