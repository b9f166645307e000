"""NodeKit: what a node needs to run agents, sent to each node host once.

Why a kit and not the runtime: a node runs the agents' behaviours (the LLM loop, function
agents) but decides nothing, so it needs the runtime's definitions, model, tools and
function agents, and none of its threads. What is tied to the driver's process is made
again on the node from plain data (``services``): its process groups, its own MCP hub
(the same servers and trust settings: a stdio server runs on the node that runs the agent,
an HTTP one is reached from there), its worktrees (of the same workspace path, on the
node's machine), and, when the runtime traces, a call tracer that sends each model and tool
call's span back to the driver as data (``cluster.node_tracing``). What a node's runs read
of the driver's store goes through the driver: the allow rules remembered for a tree
(``remembered``: asked over the link at each ask, as a run on one machine reads the store),
and how mail between the node's runs is recorded (``mail``: ``actors.remote.NodeMail``).

Definitions are the runtime's as of a version: those at start, then each set after a reload
on the driver, pushed to every node over its link (``ClusterHosting.push_definitions``) and
taken by the node's kit (``definitions``) in order with the starts. Code that a node cannot
import travels by value (``by_value``): the modules of the function agents, and every
module this process loaded from outside the installed packages (a script's own modules, a
test's helpers, the module a tool is defined in); code installed on every node goes by
reference.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from subagents.actors.agent import BehaviourFactory
from subagents.actors.remote import NodeMail
from subagents.behaviour.port import AgentEnv
from subagents.cluster.connect import ClusterError
from subagents.definitions.spec import AgentSpec
from subagents.tools.lease_line import LeaseLine
from subagents.tools.processes import ProcessGroups

if TYPE_CHECKING:
    from subagents.cluster.node_lease import NodeLease

_NODE_PROCESSES: Any = None
"""Stands for the process groups a node makes for itself (they hold locks: not sent)."""


class KitError(ClusterError):
    """Something a node needs cannot be sent to it; the message says what."""


class NodeKit:
    """The function agents and the agent environment a node runs its agents with."""

    def __init__(
        self,
        functions: Mapping[str, Callable[..., Any]],
        env: AgentEnv,
        agents: list[AgentSpec],
        behaviours_for: Callable[
            [Mapping[str, Callable[..., Any]], AgentEnv], Callable[[AgentSpec], BehaviourFactory]
        ],
        mail: NodeMail | None = None,
    ) -> None:
        """``mail``: mail between a node's runs goes straight there, recorded as it says
        (None: every mail goes by the driver's supervisor)."""
        self.functions = dict(functions)
        self.behaviours_for = behaviours_for
        """How to run each agent's runs on the node (the runtime's ``behaviours``, handed in:
        ``cluster/`` does not import the runtime above it; it travels by reference)."""
        self.agents = list(agents)
        self.mcp = env.mcp.blueprint() if env.mcp is not None else None
        """The driver's MCP hub as plain data: the node makes its own from it."""
        self.worktrees = str(env.worktrees.workspace) if env.worktrees is not None else None
        """The workspace whose repository the node's ``isolation: worktree`` runs use."""
        self.traced = env.tracer is not None
        self.remembers = env.remembered is not None
        """Whether a node's runs ask the driver for the rules remembered for their tree (the
        driver's store has them; the node reads none itself)."""
        self.mail = mail
        """Whether the node reports its runs' model and tool calls for tracing."""
        self.tracer: Any = None
        self.lease: NodeLease | None = None
        """The driver's lease line kept on the node (``keep_lease``; made there)."""
        self.version = 0
        """Which of the runtime's definitions ``agents`` are: 0 at start, one more after
        each reload that changed them (``definitions``)."""
        self.env = dataclasses.replace(
            env,
            agents=self.snapshot,
            processes=_NODE_PROCESSES,  # the node's own, made there (``behaviour_for``)
            tracer=None,
            mcp=None,
            worktrees=None,
            remembered=None,  # the driver's store: asked over the link (``behaviour_for``)
            offers={},  # the node makes its own (the driver's grows while runs start)
        )

    def snapshot(self) -> list[AgentSpec]:
        return self.agents

    def definitions(self, version: int, agents: list[AgentSpec]) -> bool:
        """Take the runtime's definitions as of ``version`` (pushed after a reload); an
        older or repeated version is ignored (it may come after a newer one). Whether it
        was taken."""
        if version <= self.version:
            return False
        self.agents, self.version = list(agents), version
        return True

    def behaviour_for(
        self, remembered: Callable[[str], tuple[str, ...]] | None = None
    ) -> Callable[[AgentSpec], BehaviourFactory]:
        """On the node: how to run each agent, with the node's own services (made here,
        once): process groups, an MCP hub, worktrees, a call tracer; and ``remembered``,
        how the node reads the rules remembered for a tree (from the driver), when the
        driver's runs read them."""
        if self.env.processes is _NODE_PROCESSES:
            from subagents.cluster.node_tracing import NodeCallTracer
            from subagents.isolation.worktrees import Worktrees
            from subagents.mcp.hub import McpHub

            self.tracer = NodeCallTracer() if self.traced else None
            self.env = dataclasses.replace(
                self.env,
                processes=ProcessGroups(),
                mcp=McpHub(**self.mcp) if self.mcp is not None else None,
                worktrees=Worktrees(self.worktrees) if self.worktrees is not None else None,
                tracer=self.tracer,
                remembered=remembered if self.remembers else None,
            )
        return self.behaviours_for(self.functions, self.env)

    def keep_lease(self, ask: Callable[[float], float | None]) -> None:
        """On the node, once its runs' link exists: the driver's lease line kept here
        (``cluster/node_lease.py``, asked by ``ask``), which the node's commands and stdio
        MCP servers get from its first answer on, as the driver's get its own."""
        from subagents.cluster.node_lease import NodeLease

        def given(line: LeaseLine) -> None:
            env = self.env
            if env.processes is not _NODE_PROCESSES:
                env.processes.lease_env = line.environment
            if env.mcp is not None:  # (stdio servers: named by its /proc link)
                env.mcp.lease_env = line.named_environment

        self.close_lease()
        self.lease = NodeLease(ask, given).start()

    def close_lease(self) -> None:
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.close()

    def close_services(self, timeout: float = 10.0) -> None:
        """On the node, when its host closes: what the node's runs started goes (the tools'
        processes, MCP servers); worktrees still open are removed if unchanged, else kept and
        logged, as on one machine."""
        from subagents.behaviour.port import close_tool_services

        env = self.env
        if env.processes is not _NODE_PROCESSES:
            env.processes.kill_all()
        close_tool_services(env.worktrees, env.mcp, timeout)
        self.close_lease()

    def checked(self) -> NodeKit:
        """This kit, once it is known to travel (``travel.dumps``: Ray's cloudpickle, and
        msgspec Structs of by-value modules rebuilt whole); else a
        ``KitError`` naming what would not."""
        from subagents.cluster.travel import dumps

        by_value(self.functions.values())
        named: dict[str, Any] = {"the function agents": self.functions}
        named.update(
            {
                f"the agent environment's {f.name}": getattr(self.env, f.name)
                for f in dataclasses.fields(self.env)
                if f.name != "agents"
            }
        )
        named["the agents' definitions"] = self.agents
        for what, value in named.items():
            try:
                dumps(value)
            except Exception as exc:
                raise KitError(
                    f"{what} cannot be sent to the cluster's nodes ({type(exc).__name__}:"
                    f" {exc}); on a cluster what runs use must be picklable (a model, tools,"
                    " functions defined at module level)"
                ) from exc
        return self


def by_value(functions: Iterable[Callable[..., Any]]) -> Any:
    """Ray's cloudpickle, told to send by value the modules a node or the head cannot import:
    the modules of ``functions`` that are not part of this package (a script's, a test
    module's), and every module this process loaded from outside the installed packages
    (``user_modules``: what a function agent's or a tool's module imports from beside it, a
    test's helpers, a script's sibling files). Pickled by reference, an object of such a
    module fails on the node (``No module named ...``) when the kit is unpacked there."""
    from ray import cloudpickle  # untyped: reached through Any

    pickler: Any = cloudpickle
    found = {module.__name__: module for module in user_modules()}
    for fn in functions:
        name = getattr(fn, "__module__", None)
        module = sys.modules.get(name) if name else None
        if module is not None and name != "__main__" and not _ours(name or ""):
            found[module.__name__] = module
    for module in found.values():
        pickler.register_pickle_by_value(module)
    return pickler


def user_modules() -> list[ModuleType]:
    """The modules loaded in this process from files outside Python's own library and its
    installed packages (``sysconfig``'s paths), this package excepted: the program's own code,
    which the other processes of a cluster cannot be assumed to import. Code installed on
    every node (in site-packages) still goes by reference."""
    installed = tuple(
        os.path.realpath(path) + os.sep
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_paths().get(key))
    )
    found = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not path or name == "__main__" or _ours(name) or not path.endswith(".py"):
            continue
        if not os.path.realpath(path).startswith(installed):
            found.append(module)
    return found


def _ours(name: str) -> bool:
    return name == "subagents" or name.startswith("subagents.")
