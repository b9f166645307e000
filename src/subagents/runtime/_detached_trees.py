"""Trees that outlive the program that started them: a Runtime hosted by a named, detached
Ray actor on the head node (a ``TreeHost``).

``Runtime(cluster=...)`` keeps its supervisor in the driver, so its runs end with the
driver. A program (or `subagents run --ray ... --detach`) that wants to start a tree and
exit hands the tree to a ``TreeHost`` instead: a Ray actor, ``lifetime="detached"``, pinned
to the head node (beside the store's actor), named ``subagents-tree-<token>`` in the
``subagents`` namespace, which builds the very same ``Runtime(cluster=...)`` in its own
process (its supervisor, its node hosts on every node, the cluster's store), admits the
root there and hands its run id back. From then on the tree is like a `run --detach` tree
on one machine: ``ps``/``log``/``tree``/``wait`` read it from the cluster's store,
``stop``/``send`` post commands through the store that its runtime takes within its
``command_poll_s``, and a new ``Runtime`` on the same cluster sees its runs and stops or
mails them the same way (a run another runtime hosts). When the root ends, the host closes
its runtime (its node hosts end with it) and ends its own actor: nothing is left running.

Why a whole Runtime in the detached actor, and not the ``SupervisorCore`` alone in a
detached actor with the driver's ``Runtime`` as its client (the issue's first design):

- the runtime's public API (root waiters, event subscribers, the approval handler,
  function agents, ``placements``) is tied to the process that holds the ``Runtime``;
  moving only the core would need a remote protocol for each of them, and every driver
  would still lose its callbacks when it exits. Hosting the whole runtime keeps one code
  path: the tree runs on the same supervisor, effector, node hosts and store as an
  attached one, so everything the cluster tests check holds for it;
- control from outside already exists and is already tested: commands through the store
  (what `run --detach` trees on one machine use), leases that say whether the host lives;
- one host per tree: the tree's definitions, model and limits are its own (two programs may
  start trees of different agent sets), and the host's end is simply the root's end.

What it costs: a Ray actor (a process, ~40 MB, ~1 s to start here) per detached tree, plus
its node hosts (one process per node), for as long as the tree runs.

A host whose process dies (killed, out of memory) is started again by Ray
(``max_restarts=-1``) with the arguments it was created with. Its runtime's ``owner`` ends
with the host's name, so the new process finds the tree its predecessor owned in the store
and takes it up at once, as a runtime takes up a crashed one's runs (``restore``: the
predecessor's lease is dead as soon as its process is, on the same machine): its runs go on
from what the store holds, each ends once, and the host ends with its root as before. A
host that ends on purpose (its root ended, its root refused) is killed with
``no_restart=True``: it is not started again.

What travels to the host (pickled once, like a node's kit): the Runtime's keyword
arguments, definitions included. Definitions are read where the tree is started (the CLI
loads them from the agent folders it was given) and travel as they are: the head needs no
copy of the files. The workspace is a path on the machines the runs are on.

Why in the runtime's package, not ``cluster/``: a tree host is a program built on the
``Runtime`` (as the CLI is), using ``cluster/``'s parts below it; in ``cluster/`` it imported
the runtime above it (an import cycle through ``Runtime(cluster=...)``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from subagents.cluster.connect import HEAD_ACTOR, NAMESPACE, ClusterError, connect, import_ray
from subagents.cluster.head import HEAD_RESOURCE
from subagents.cluster.kit import KitError, by_value
from subagents.cluster.travel import Travelling, dumps
from subagents.cluster.tree_hosts import TREE_HOST_PREFIX
from subagents.logs import get_logger

log = get_logger("subagents.cluster")


START_TIMEOUT_S = 300.0
"""How long starting a host and admitting its root may take (a process, its runtime, one
node host per node: seconds here, more on a loaded machine)."""

NOT_THROUGH_HERE = ("store", "cluster", "restore")
"""Runtime keywords a detached tree sets itself: the cluster's store (``store_name``), the
cluster the host is on, and no restore (the tree is new)."""


class TreeHost:
    """The actor's class (see the module): one Runtime, one root run, then gone."""

    def __init__(
        self, runtime: dict[str, Any], store_name: str, address: str, name: str = ""
    ) -> None:
        """Build the tree's runtime. Ray calls this again, with the same arguments, in a new
        process when this host's process died (``max_restarts=-1``): that runtime then takes
        up the tree its predecessor hosted, as after any crash (``restore``), and hosts it on
        to its end (see ``_predecessors``)."""
        from subagents.cluster.head import head_actor
        from subagents.cluster.remote_store import ClusterStore
        from subagents.runtime._runtime import Runtime
        from subagents.store.leases import new_owner

        ray = import_ray()
        self._ray = ray
        context = ray.get_runtime_context()
        self._me = context.current_actor
        self.name = name
        self.store = ClusterStore(head_actor(name=store_name, create=False), name=store_name)
        roots = self._predecessors() if context.was_current_actor_reconstructed else None
        try:
            self.runtime = Runtime(
                **runtime,
                store=self.store,
                cluster=address or "auto",
                restore=roots or False,
                owner=f"{new_owner()}:{name}" if name else None,
            )
        except BaseException:
            self.store.close()
            raise
        self.run_id = ""
        if roots is None:
            return  # a new host: ``start`` admits the root
        log.warning("tree host started again", host=name, roots=roots)
        if roots:
            self.run_id = roots[0]
            self._host_in_background(self.runtime.attach(self.run_id))
        else:  # its root ended (or was never admitted): nothing left to host
            threading.Thread(target=self._end, name="subagents-tree-end", daemon=True).start()

    def _predecessors(self) -> list[str]:
        """The unfinished root runs that an earlier process of this host owned (their
        owner ends with this host's name; that process is dead: Ray started this one)."""
        from subagents.messages import RunStatus

        if not self.name:
            return []
        live = [status for status in RunStatus if not status.terminal]
        return [
            record.run_id
            for record in self.store.list_runs(statuses=live)
            if record.depth == 0 and (record.owner or "").endswith(f":{self.name}")
        ]

    def start(self, agent: str, task: str, options: dict[str, Any]) -> dict[str, Any]:
        """Admit the root run; its id, and where it is hosted. A refused root
        (``AdmissionError``) ends this host: it has nothing to host."""
        try:
            handle = self.runtime.spawn(agent, task, **options)
            handle.wait_admitted()  # a refusal on the handle is the caller's error too
        except BaseException:
            self._close()  # the caller removes this actor once it has the error
            raise
        self.run_id = handle.run_id
        self._host_in_background(handle)
        return self.describe()

    def _host_in_background(self, handle: Any) -> None:
        threading.Thread(
            target=self._host, args=(handle,), name="subagents-tree-host", daemon=True
        ).start()

    def _host(self, handle: Any) -> None:
        try:
            outcome = handle.result()
            log.info("detached tree ended", run_id=outcome.run_id, status=str(outcome.status))
        except Exception:
            log.exception("detached tree: waiting for its root failed", run_id=self.run_id)
        self._end()

    def _close(self) -> None:
        """Close the runtime (its node hosts go with it) and the store client."""
        try:
            self.runtime.close()
        finally:
            self.store.close()

    def _end(self) -> None:
        """Close, then end this actor: nothing of the tree is left running."""
        try:
            self._close()
        finally:
            with contextlib.suppress(Exception):
                self._ray.kill(self._me, no_restart=True)

    def until_ended(self) -> None:
        """Never answered: the call fails when this host's process ends (``ray.get`` on it
        raises ``RayActorError``), which is how a caller waits for the host to go."""
        threading.Event().wait()

    def describe(self) -> dict[str, Any]:
        context = self._ray.get_runtime_context()
        return {
            "run_id": self.run_id,
            "owner": self.runtime.owner,
            "pid": os.getpid(),
            "node": context.get_node_id(),
        }


@dataclass(frozen=True)
class DetachedTree:
    """A tree started on the cluster by ``start_detached``: its root's id, its host actor's
    name, the host's runtime owner (the ``owner`` of its runs' records), process and node."""

    run_id: str
    host: str
    owner: str
    pid: int
    node: str


def start_detached(
    agent: str,
    task: str,
    *,
    cluster: str | None = None,
    store_name: str = HEAD_ACTOR,
    options: Mapping[str, Any] | None = None,
    **runtime: Any,
) -> DetachedTree:
    """Start ``agent`` on ``task`` on the Ray cluster ``cluster`` (an address, ``auto``;
    default ``$SUBAGENTS_RAY_ADDRESS``) in a tree host of its own, and return once the root
    is admitted: the tree goes on after this process exits.

    ``runtime``: the ``Runtime``'s keyword arguments (``agents``, ``model``, ``limits``,
    ``tools``...), sent to the host as they are (they must pickle; function agents of a
    script or test module travel by value). ``options``: the root's ``spawn`` keywords
    (``timeout``, ``token_budget``...). The tree is recorded in the cluster's store
    ``store_name`` (started on the head if none runs). ``AdmissionError`` if the root is
    refused; ``ClusterError`` if the host cannot be started (the message says why)."""
    from subagents.cluster.connect import resolve_address
    from subagents.cluster.head import head_actor
    from subagents.supervision.core import AdmissionError

    _check_agent(agent, runtime)
    _check_runtime_arguments(runtime)
    address = resolve_address(cluster)
    if address is None:
        raise ClusterError(
            "start_detached: no Ray cluster given (cluster=, or $SUBAGENTS_RAY_ADDRESS)"
        )
    ray = connect(address)
    head_actor(name=store_name, create=True)  # the store the tree is recorded in
    _check_travels(runtime)
    name = f"{TREE_HOST_PREFIX}{secrets.token_hex(6)}"
    host = (
        ray.remote(TreeHost)
        .options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            num_cpus=0,
            resources={HEAD_RESOURCE: 0.001},
            max_restarts=-1,  # its process killed: Ray starts it again, and it takes up the tree
            max_concurrency=4,
        )
        .remote(Travelling(dict(runtime)), store_name, address, name)
    )
    try:
        found = ray.get(
            host.start.remote(agent, task, dict(options or {})), timeout=START_TIMEOUT_S
        )
    except ray.exceptions.RayTaskError as exc:
        with contextlib.suppress(Exception):
            ray.kill(host, no_restart=True)
        cause = exc.cause if hasattr(exc, "cause") else None
        if isinstance(cause, AdmissionError):
            raise AdmissionError(str(cause)) from exc
        raise ClusterError(f"the detached tree's host failed: {_first_lines(exc)}") from exc
    except ray.exceptions.RayError as exc:
        with contextlib.suppress(Exception):
            ray.kill(host, no_restart=True)
        raise ClusterError(f"the detached tree's host did not start: {_first_lines(exc)}") from exc
    return DetachedTree(
        run_id=found["run_id"],
        host=name,
        owner=found["owner"],
        pid=found["pid"],
        node=found["node"],
    )


def _check_runtime_arguments(runtime: Mapping[str, Any]) -> None:
    """``TypeError`` for the ``Runtime`` arguments a detached tree decides itself."""
    given = sorted(set(runtime) & set(NOT_THROUGH_HERE))
    if given:
        raise TypeError(
            f"start_detached: {', '.join(given)} cannot be given: a detached tree uses the"
            " cluster's store (store_name=) on the cluster it is started on, and restores"
            " nothing"
        )


def _check_travels(runtime: Mapping[str, Any]) -> None:
    """The runtime arguments pickle (a script's function agents by value), or ``KitError``
    saying what must be picklable: found here, not in the host's first start."""
    by_value(_functions_in(runtime.get("agents")))
    try:
        dumps(runtime)
    except Exception as exc:
        raise KitError(
            f"the detached tree's runtime arguments cannot be sent to the cluster"
            f" ({type(exc).__name__}: {exc}); what runs use must be picklable (a model,"
            " tools, functions defined at module level)"
        ) from exc


def _check_agent(agent: str, runtime: Mapping[str, Any]) -> None:
    """An agent that is not among ``runtime``'s is refused here, before any host starts,
    when the agents are all given in code (no folders to read, nothing discovered)."""
    from subagents.runtime._assembly import collect_agents
    from subagents.supervision.core import AdmissionError

    if runtime.get("agent_dirs") or runtime.get("discover"):
        return  # the host reads the folders: it decides
    specs, _functions = collect_agents(runtime.get("agents"), (), False)
    known = sorted(spec.name for spec in specs)
    if agent not in known:
        raise AdmissionError(f"unknown agent {agent!r}; known agents: {', '.join(known)}")


def _functions_in(agents: Any) -> list[Any]:
    """The functions of the function agents among ``agents`` (a Runtime's ``agents``)."""
    from subagents.behaviour.function import FunctionAgent

    items = agents.values() if isinstance(agents, Mapping) else (agents or ())
    return [
        item.fn if isinstance(item, FunctionAgent) else item
        for item in items
        if isinstance(item, FunctionAgent) or callable(item)
    ]


def _first_lines(exc: BaseException, most: int = 6) -> str:
    """The start of a Ray error's text (it carries the remote traceback): enough to say what
    went wrong without pages of frames."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    last = [line for line in lines if not line.startswith(" ")]
    return " | ".join(last[-most:] if last else lines[:most])[:800]
