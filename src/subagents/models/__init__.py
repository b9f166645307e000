"""subagents.models: the Model protocol and its backends (offline scripted, anthropic).

``default_model()`` picks the backend from the environment: Claude when ``ANTHROPIC_API_KEY``
is set, else the offline scripted model, so everything runs with or without a key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.models.base import CancelSignal, Model, ModelError
from subagents.models.names import Price, estimate_cost, model_id, resolve_model
from subagents.models.retry import RetryPolicy
from subagents.models.script import ScriptError, Turn
from subagents.models.scripted import ScriptedModel

if TYPE_CHECKING:
    from subagents.models.anthropic import AnthropicModel

API_KEY_ENV = "ANTHROPIC_API_KEY"


def __getattr__(name: str) -> Any:
    """Import the anthropic backend only when asked for: the SDK takes a second to import,
    and offline runs (and every function agent) never need it."""
    if name == "AnthropicModel":
        from subagents.models.anthropic import AnthropicModel

        return AnthropicModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AnthropicModel",
    "CancelSignal",
    "Model",
    "ModelError",
    "Price",
    "RetryPolicy",
    "ScriptError",
    "ScriptedModel",
    "Turn",
    "default_model",
    "estimate_cost",
    "model_id",
    "resolve_model",
]

log = get_logger(__name__)


def default_model(specs: Iterable[AgentSpec] = ()) -> Model:
    """``AnthropicModel`` when ``ANTHROPIC_API_KEY`` is set, else the offline ``ScriptedModel``
    playing the ``script:`` of the given definitions (agents without one give the default reply).
    """
    if os.environ.get(API_KEY_ENV):
        from subagents.models.anthropic import AnthropicModel

        return AnthropicModel()
    log.info("model.offline", reason=f"{API_KEY_ENV} is not set: using the offline scripted model")
    return ScriptedModel.from_specs(specs)
