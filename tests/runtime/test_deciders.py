"""The supervisor finds what decides a message by its exact type (``actors/deciders.py``,
and the two kinds ``SupervisorActor._handle`` takes before it).

That is only the ``match`` it replaced while no decided message type is subclassed: a
subclass's messages would find no decider (and be dropped as unexpected) where a ``case``
with ``isinstance`` took them. These tests keep that promise checked.
"""

from __future__ import annotations

import importlib
import pkgutil

import subagents
from subagents.actors.deciders import deciders
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Inspect, PollCommands, SendMail, StatusOf, Sweep, ToolStarting
from subagents.runtime import Runtime


def _trivial(ctx: AgentContext) -> str:
    return "done"


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def _import_every_module() -> None:
    """Every module of the package (a subclass anywhere must be loaded to be seen); one
    that needs an extra that is not installed is skipped."""
    for info in pkgutil.walk_packages(subagents.__path__, "subagents."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue


def test_no_message_type_the_supervisor_decides_is_subclassed() -> None:
    _import_every_module()
    with Runtime([FunctionAgent.create("trivial", _trivial)]) as rt:
        table = deciders(rt.core, rt.store, lambda run_id, attempt: None)
    assert len(table) >= 20
    by_type = {*table, SendMail, ToolStarting}  # the two ``SupervisorActor._handle`` takes first
    subclassed = {cls.__name__: _subclasses(cls) for cls in by_type if _subclasses(cls)}
    assert subclassed == {}


def test_what_the_supervisor_answers_itself_is_not_decided() -> None:
    with Runtime([FunctionAgent.create("trivial", _trivial)]) as rt:
        table = deciders(rt.core, rt.store, lambda run_id, attempt: None)
    assert not {PollCommands, Inspect, StatusOf, Sweep} & table.keys()
