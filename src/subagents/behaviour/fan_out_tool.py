"""The ``fan_out`` tool of LLM agents: several subagents on one call, one synthesized answer.

Why a tool and not only parallel spawns: with ``spawn_subagent`` the model reads every
result and combines them itself, which costs tokens and hides disagreements in prose. With
``fan_out`` the runtime runs the children (in parallel, or one after the other for
``chain``), combines their results by a strategy of ``supervision.synthesis``, and the model
gets one tool result: the value, the conflicts, the sources and the failures.

This class is the bookkeeping only: it turns the tool input into SpawnRequests and the
answers (SpawnReply, ChildDone) into the tool result. The LLM loop owns the actor side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from subagents.behaviour.request_ids import FAN_OUT_CHILD, use_id_of
from subagents.definitions.spec import AgentSpec
from subagents.messages import ChildDone, SpawnReply, SpawnRequest, ToolSchema
from subagents.supervision.synthesis import (
    STRATEGIES,
    Item,
    SynthesisError,
    outcome_value,
    synthesize,
)

FAN_OUT = "fan_out"
MAX_RUNS = 20
_SEP = FAN_OUT_CHILD


class FanOutError(ValueError):
    """The tool input cannot be run; the message names the argument."""


@dataclass
class _Group:
    call: str
    """The call's request id (``request_ids``): its children's are made from it."""
    parent_run_id: str
    strategy: str
    runs: list[dict[str, Any]]
    threshold: float
    weights: dict[str, float]
    score_field: str | None
    items: dict[int, Item] = field(default_factory=dict)


def fan_out_schema(dispatchable: list[AgentSpec]) -> ToolSchema:
    names = [s.name for s in dispatchable]
    return ToolSchema(
        name=FAN_OUT,
        description=(
            "Run several subagents and get ONE combined answer. Strategies: merge (deep-merge"
            " JSON objects, concatenate lists), vote (most common answer), consensus (fields"
            " agreed by more than `threshold` of the runs), best_pick (highest `score_field`"
            " of JSON results), weighted_average (numbers, weighted by `weights` per agent),"
            " chain (one after the other: each run gets the previous output as <input>; the"
            " last wins), collect (every value, in the order of the runs, nothing combined)."
            " Returns {strategy, value, conflicts, sources, failed, error}:"
            " disagreements are listed in conflicts, never hidden."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "runs": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": MAX_RUNS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "agent": {"type": "string", "enum": names},
                            "task": {"type": "string"},
                            "context": {"type": "string"},
                        },
                        "required": ["agent", "task"],
                    },
                },
                "strategy": {"type": "string", "enum": list(STRATEGIES)},
                "threshold": {"type": "number", "default": 0.5},
                "weights": {"type": "object", "additionalProperties": {"type": "number"}},
                "score_field": {"type": "string"},
            },
            "required": ["runs", "strategy"],
        },
    )


class FanOutCalls:
    """Open ``fan_out`` calls of one run, by tool_use id (a child of an older store's
    request answers under its call's tool_use id alone: ``request_ids``)."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}

    @staticmethod
    def owns(request_id: str) -> bool:
        return _SEP in request_id

    def start(self, call: str, args: dict[str, Any], parent_run_id: str) -> list[SpawnRequest]:
        """Check the input and open a group for the call of request id ``call``; the spawns
        to send now (one for ``chain``)."""
        group = _parse(call, args, parent_run_id)
        self.groups[use_id_of(call)] = group
        if group.strategy == "chain":
            return [self._request(group, 0, None)]
        return [self._request(group, i, None) for i in range(len(group.runs))]

    def _request(self, group: _Group, index: int, previous: str | None) -> SpawnRequest:
        run = group.runs[index]
        task = str(run["task"])
        if previous is not None:
            task = f"{task}\n\n<input>\n{previous}\n</input>"
        return SpawnRequest(
            request_id=f"{group.call}{_SEP}{index}",
            agent=str(run["agent"]),
            task=task,
            parent_run_id=group.parent_run_id,
            context=run.get("context"),
        )

    def on_message(self, message: SpawnReply | ChildDone) -> tuple[str, str | None, Any]:
        """Record an answer. Returns (use_id, tool result text or None, next spawn or None)."""
        call, _, index_text = message.request_id.partition(_SEP)
        use_id = use_id_of(call)
        group = self.groups.get(use_id)
        if group is None:
            return use_id, None, None
        index = int(index_text)
        agent = str(group.runs[index]["agent"])
        weight = float(group.weights.get(agent, 1.0))
        if isinstance(message, SpawnReply):
            if message.error is None:
                return use_id, None, None  # admitted: the outcome comes later
            group.items[index] = Item(
                source=f"refused:{agent}", agent=agent, weight=weight, ok=False, error=message.error
            )
        else:
            outcome = message.outcome
            group.items[index] = Item(
                source=outcome.run_id,
                agent=agent,
                weight=weight,
                value=outcome_value(outcome.result, outcome.typed) if outcome.ok else None,
                ok=outcome.ok,
                error=None if outcome.ok else f"{outcome.status}: {outcome.error}",
            )
        if group.strategy == "chain":
            item = group.items[index]
            if item.ok and index + 1 < len(group.runs):
                previous = outcome.result if isinstance(message, ChildDone) else None
                return use_id, None, self._request(group, index + 1, previous)
        elif len(group.items) < len(group.runs):
            return use_id, None, None
        del self.groups[use_id]
        return use_id, self._result(group), None

    def _result(self, group: _Group) -> str:
        items = [group.items[i] for i in sorted(group.items)]
        scorer = None
        if group.score_field is not None:
            key = group.score_field

            def scorer(value: Any) -> float:
                return float(value[key])

        try:
            synthesis = synthesize(
                group.strategy,
                items,
                threshold=group.threshold,
                scorer=scorer,
                weights=group.weights or None,
            )
        except SynthesisError as exc:
            return msgspec.json.encode({"strategy": group.strategy, "error": str(exc)}).decode()
        return msgspec.json.encode(synthesis).decode()


def _parse(call: str, args: dict[str, Any], parent_run_id: str) -> _Group:
    runs = args.get("runs")
    if not isinstance(runs, list) or not runs:
        raise FanOutError("argument 'runs' must be a non-empty list of {agent, task}")
    if len(runs) > MAX_RUNS:
        raise FanOutError(f"argument 'runs' has {len(runs)} entries; at most {MAX_RUNS}")
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise FanOutError(f"runs[{i}] must be an object {{agent, task}}, got {run!r}")
        for key in ("agent", "task"):
            if not isinstance(run.get(key), str) or not run[key].strip():
                raise FanOutError(f"runs[{i}].{key} must be a non-empty string")
        if run.get("context") is not None and not isinstance(run["context"], str):
            raise FanOutError(f"runs[{i}].context must be a string")
    strategy = args.get("strategy")
    if strategy not in STRATEGIES:
        raise FanOutError(f"argument 'strategy' must be one of {', '.join(STRATEGIES)}")
    threshold = args.get("threshold", 0.5)
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise FanOutError(f"argument 'threshold' must be a number, got {threshold!r}")
    weights = args.get("weights") or {}
    if not isinstance(weights, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in weights.values()
    ):
        raise FanOutError("argument 'weights' must map agent names to numbers")
    score_field = args.get("score_field")
    if score_field is not None and not isinstance(score_field, str):
        raise FanOutError("argument 'score_field' must be a string")
    if strategy == "best_pick" and score_field is None:
        raise FanOutError("strategy best_pick needs 'score_field': a numeric field of results")
    return _Group(
        call=call,
        parent_run_id=parent_run_id,
        strategy=str(strategy),
        runs=runs,
        threshold=float(threshold),
        weights={str(k): float(v) for k, v in weights.items()},
        score_field=score_field,
    )
