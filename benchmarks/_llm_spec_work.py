"""_llm_spec_work: the calls an LLM run of an already-seen definition makes, by role.

``runs`` scripted LLM runs (one model turn, no tool) of one definition, one after another,
with a profile hook on every thread (``spawn.Calls``): the Python and builtin calls per run
on each role's threads, and the calls per run made inside the per-run set-up of an LLM run
(``LLMBehaviour.__init__``, ``ToolCalls.__init__``, ``offered_tools``, ``network_of``,
``hooks_of``) and inside the event log check (``Subscribers.publish``). Counted, never timed:
the machine's load does not move a count (issue 26 item 2: per-spec work done once per
definition, not per run).

Usage: ``python benchmarks/_llm_spec_work.py [--runs N]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections import Counter
from typing import Any

from _common import quiet_logs
from spawn import role_of
from subagents.definitions.spec import AgentSpec
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime


class _Counter:
    """Calls per role, and calls made under each watched function (by its qualified name)."""

    def __init__(self) -> None:
        self.by_role: Counter[str] = Counter()
        self.under: Counter[str] = Counter()
        self.counting = False
        self._stack = threading.local()

    def hook(self, frame: Any, event: str, _arg: Any) -> None:
        stack: list[str | None] | None = getattr(self._stack, "frames", None)
        if stack is None:
            stack = self._stack.frames = []
        if event == "return":
            if stack:
                stack.pop()
            return
        if event not in ("call", "c_call"):
            return
        if self.counting:
            self.by_role[role_of(threading.current_thread().name)] += 1
            for qual in {q for q in stack if q is not None}:
                self.under[qual] += 1
        if event == "call":  # a Python frame: popped at its "return"
            qual = frame.f_code.co_qualname
            stack.append(qual if qual in _WATCHED_QUALS else None)

    def per_run(self, runs: int) -> dict[str, float]:
        out = {f"calls_{role}": round(c / runs, 1) for role, c in sorted(self.by_role.items())}
        out["calls_all"] = round(sum(self.by_role.values()) / runs, 1)
        for qual in sorted(_WATCHED_QUALS):
            out[f"under {qual}"] = round(self.under[qual] / runs, 1)
        return out


_WATCHED_QUALS = frozenset(
    {
        "LLMBehaviour.__init__",
        "ToolCalls.__init__",
        "offered_tools",
        "network_of",
        "hooks_of",
        "Subscribers.publish",
    }
)


def count(runs: int) -> dict[str, float]:
    """The calls per run of ``runs`` scripted LLM runs of one definition (after 20 warm-up)."""
    spec = AgentSpec(name="worker", description="One model turn.", tools=())
    model = ScriptedModel({"worker": [{"text": "done"}]})
    counter = _Counter()
    threading.setprofile(counter.hook)
    sys.setprofile(counter.hook)
    try:
        with Runtime({"worker": spec}, model=model) as rt:
            for i in range(20):
                rt.run("worker", f"warm {i}", wait=60)
            counter.counting = True
            for i in range(runs):
                outcome = rt.run("worker", f"part {i}", wait=60)
                if outcome.status != "completed":
                    raise RuntimeError(f"run {i} did not complete: {outcome!r}")
            counter.counting = False
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type,unused-ignore]  # (None: unset)
    return counter.per_run(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    quiet_logs()
    print(json.dumps(count(args.runs), indent=1))


if __name__ == "__main__":
    main()
