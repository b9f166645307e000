"""Helpers for policy tests: a runtime on the offline model, and event capture."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shown import ShownModel
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.supervision.limits import Limits


def spec(name: str, **fields: Any) -> AgentSpec:
    return AgentSpec(name=name, description=f"the {name} agent", **fields)


class Events:
    """Every event of a runtime, and a way to wait for one."""

    def __init__(self) -> None:
        self.items: list[Event] = []
        self._cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self._cond:
            self.items.append(event)
            self._cond.notify_all()

    def of(self, kind: EventKind, run_id: str | None = None) -> list[Event]:
        with self._cond:
            return [e for e in self.items if e.kind is kind and run_id in (None, e.run_id)]

    def wait_for(self, test: Callable[[Event], bool], timeout: float = 10.0) -> Event:
        with self._cond:
            ok = self._cond.wait_for(lambda: any(test(e) for e in self.items), timeout)
            assert ok, "the awaited event did not come"
            return next(e for e in self.items if test(e))


@pytest.fixture
def make_runtime() -> Iterator[Callable[..., tuple[Runtime, ScriptedModel, Events]]]:
    opened: list[Runtime] = []

    def make(
        agents: list[Any], scripts: dict[str, Any], limits: Limits | None = None, **kw: Any
    ) -> tuple[Runtime, ScriptedModel, Events]:
        model = ShownModel(scripts)
        rt = Runtime(agents, model=model, limits=limits, **kw)
        events = Events()
        rt.subscribe(events)
        opened.append(rt)
        return rt, model, events

    yield make
    for rt in opened:
        rt.close()
