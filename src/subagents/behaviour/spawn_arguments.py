"""The supervision-policy arguments of ``spawn_subagent``, read and checked for the LLM loop.

Why separate: the model sends JSON; each policy argument gets one clear ``ToolError`` naming
it (an ``is_error`` tool result the model can correct), and the LLM loop stays a loop.
"""

from __future__ import annotations

from typing import Any

from subagents.messages import CLEANUPS, ON_FAILURE
from subagents.tools.errors import ToolError

POLICY_PROPERTIES: dict[str, Any] = {
    "token_budget": {
        "type": "integer",
        "minimum": 1,
        "description": "Most tokens the child (and its own children) may use; capped by"
        " what you have left.",
    },
    "cost_budget_usd": {"type": "number", "description": "Most USD the child may spend."},
    "on_failure": {
        "type": "string",
        "enum": list(ON_FAILURE),
        "description": "If the child fails: report it to you (default), retry it up to"
        " max_retries times first, or fail_parent (you fail too, with its reason).",
    },
    "max_retries": {"type": "integer", "minimum": 0},
    "share": {
        "type": "array",
        "items": {"type": "string"},
        "description": "Names of your shared-context keys the child gets a copy of.",
    },
    "inherit_messages": {
        "type": "boolean",
        "description": "Start the child with your conversation so far.",
    },
    "cleanup": {
        "type": "string",
        "enum": list(CLEANUPS),
        "description": "Keep the child's transcript once it is archived (default), or delete it.",
    },
}


def spawn_policy_fields(args: dict[str, Any]) -> dict[str, Any]:
    """SpawnRequest fields from the policy arguments present in ``args``."""
    out: dict[str, Any] = {}
    budget = args.get("token_budget")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise ToolError(f"argument 'token_budget' must be a positive integer, got {budget!r}")
        out["token_budget"] = budget
    cost = args.get("cost_budget_usd")
    if cost is not None:
        if isinstance(cost, bool) or not isinstance(cost, int | float) or cost <= 0:
            raise ToolError(f"argument 'cost_budget_usd' must be a positive number, got {cost!r}")
        out["cost_budget_usd"] = float(cost)
    on_failure = args.get("on_failure")
    if on_failure is not None:
        if on_failure not in ON_FAILURE:
            raise ToolError(
                f"argument 'on_failure' must be one of {', '.join(ON_FAILURE)}, got {on_failure!r}"
            )
        out["on_failure"] = on_failure
    retries = args.get("max_retries")
    if retries is not None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ToolError(f"argument 'max_retries' must be an integer >= 0, got {retries!r}")
        out["max_retries"] = retries
    share = args.get("share")
    if share is not None:
        if not isinstance(share, list) or not all(isinstance(k, str) for k in share):
            raise ToolError(f"argument 'share' must be a list of key names, got {share!r}")
        out["share"] = tuple(share)
    inherit = args.get("inherit_messages")
    if inherit is not None:
        if not isinstance(inherit, bool):
            raise ToolError(f"argument 'inherit_messages' must be true or false, got {inherit!r}")
        out["inherit_messages"] = inherit
    cleanup = args.get("cleanup")
    if cleanup is not None:
        if cleanup not in CLEANUPS:
            raise ToolError(f"argument 'cleanup' must be 'keep' or 'delete', got {cleanup!r}")
        out["cleanup"] = cleanup
    return out
