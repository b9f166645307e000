"""subagents.models: the Model protocol and its backends (offline scripted, anthropic)."""

from subagents.models.base import CancelSignal, Model, ModelError
from subagents.models.script import ScriptError, Turn
from subagents.models.scripted import ScriptedModel

__all__ = [
    "CancelSignal",
    "Model",
    "ModelError",
    "ScriptError",
    "ScriptedModel",
    "Turn",
]
