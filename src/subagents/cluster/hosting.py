"""ClusterHosting: a runtime's runs hosted on the nodes of a Ray cluster, seen from the driver.

The runtime keeps its supervisor (one ``SupervisorActor`` over the one ``SupervisorCore``)
in the driver's process: every decision (admission, the limits, budgets, mail routing, the
end of a run) is made there, once, for the whole cluster, exactly as on one machine. What
moves is where the runs' agent actors live: one ``NodeHost`` per node, each a pykka runtime
of its own (``actors.remote.NodeRuns``). This class is the driver's side of the link:

- ``send(node, effects)``: the supervisor's effects for the runs on ``node`` (starts, tells,
  stops), numbered and sent as one frame per batch over the node's link (``cluster.link``,
  a socket per set-up; ``RoutingEffector`` gathers them);
- one thread per node reads what the node's agents told and asked the supervisor (sent as it
  is queued) and hands it to the supervisor in order, asks too (``actors.node_asks``: queued
  at once, in the link's order, their answers waited for on a small pool of threads so that a
  slow answer does not hold the node's other reports back). Two asks are
  the driver's store's, answered here without the supervisor, as a run on one machine reads
  or writes the store from its own thread: ``RecordMails`` (a node's sender's mail, written
  before its recipient on that node is handed it) and ``RememberedRules`` (the allow rules
  remembered for a tree);
- ``place``: where a run goes (``placement.Placement``: its parent's node while it has room,
  else the least loaded; a definition's ``resources:`` select the nodes);
- a node host lost (its link closes: its process died, its node went; or the link broke
  while the process lives on, which is then killed, since frames may have been lost): its
  records of mail are fenced first (``record_fence``: each committed already, or refused in
  its transaction), then the runs whose start was there are handed to the supervisor
  (``HostLost``), which starts each again elsewhere from what the store holds (its
  checkpoint, the answers its calls already got), as a new attempt: whatever the lost start
  still sends is discarded, so each run ends once and each result is reported once. Ray
  restarts the host's process; the host is set up again and placement uses its node again.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from subagents.actors.node_asks import NodeAsks
from subagents.actors.remote import (
    Answer,
    Asked,
    LeaseLeft,
    RecordMails,
    RememberedRules,
    RoutingEffector,
    Told,
)
from subagents.cluster.connect import ClusterError, import_ray
from subagents.cluster.kit import NodeKit
from subagents.cluster.link import (
    ANSWERS,
    DEFINITIONS,
    EFFECTS,
    LINK_PORTS_ENV,
    SILENT_S,
    LinkEnd,
    LinkError,
    connect,
    link_ports,
)
from subagents.cluster.link_tls import link_tls
from subagents.cluster.placement import Placement, PlacementError, resource_needs
from subagents.cluster.record_fence import RecordFence
from subagents.cluster.travel import Travelling
from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger
from subagents.messages import HostLost
from subagents.store.writes import RecordMail
from subagents.supervision.effects import Effect, StartRun
from subagents.telemetry import FinishedCall

log = get_logger("subagents.cluster")

SETUP_TIMEOUT_S = 120.0
FENCE_TIMEOUT_S = 10.0
"""How long a host whose link broke has to say which process it is before it is killed."""


class ClusterHosting:
    """The node hosts of one runtime, and the link between them and its supervisor."""

    _lease_left: Callable[[], float | None] | None = None
    """How long the runtime's lease line has left, for its nodes (``lease_line``)."""

    def __init__(
        self,
        owner: str,
        kit: NodeKit,
        *,
        slots: int = 100,
        registry: Any = None,
        definitions: Callable[[], Sequence[AgentSpec]] | None = None,
        on_call: Callable[[FinishedCall], None] | None = None,
        record_mail: RecordMail | None = None,
        remembered: Callable[[str], tuple[str, ...]] | None = None,
    ) -> None:
        """``registry`` (a ``RegistryClient``) and ``definitions`` (its catalog's, read on
        the registry's thread): each change of the definitions is pushed to the nodes
        before the change returns (``push_definitions``); None: the kit's, for good.
        ``on_call``: where the spans of model and tool calls made on the nodes go (the
        runtime's ``Telemetry.record_call``; None: not traced). ``record_mail``: the
        store's fenced write of mails, for the nodes' senders (when the kit's ``mail``
        says senders record); ``remembered``: the rules remembered for a tree, read from
        the store, for the nodes' runs."""
        from subagents.cluster.node_host import start_runtime_hosts

        self._ray = import_ray()
        self.ports = link_ports(os.environ.get(LINK_PORTS_ENV))  # before any host starts
        self.tls = link_tls()  # its files loaded here: a bad one is named before any host
        self.owner = owner
        self.kit = kit.checked()
        self.slots = slots
        self.placement = Placement()
        self._lock = threading.Lock()
        self._seq: dict[str, int] = {}
        self._links: dict[str, LinkEnd] = {}
        self._pids: dict[str, int] = {}
        self._killed: dict[str, int] = {}
        """node -> the pid of its host's process last killed by the driver (``_fence``)."""
        self._sending: dict[str, threading.Lock] = {}
        """node -> held while a batch is numbered and sent (numbers go out in order)."""
        self.addresses: dict[str, str] = {}
        """node -> its IP address (where its host's link listens): told with placements."""
        self._offered: dict[str, dict[str, float]] = {}
        """node -> the resources it offers (kept when it is lost: it may come back)."""
        self.placed: dict[str, list[str]] = {}
        """run id -> the nodes its starts were placed on, in order (what was observed)."""
        self._placeable: Callable[[], None] | None = None
        self._supervisor: Any = None
        self._asks: NodeAsks | None = None  # the nodes' asks, queued in order
        self.router: RoutingEffector | None = None
        self._closed = threading.Event()
        self._answers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="subagents-asks")
        self._threads: list[threading.Thread] = []
        self._pushing = threading.Lock()
        self._on_call = on_call
        self._record_mail = record_mail
        self._recording = RecordFence()  # links whose records may commit (closed when lost)
        self._node_of: dict[LinkEnd, str] = {}
        self._remembered = remembered
        self._unsubscribe: Callable[[], None] | None = None
        self.hosts = start_runtime_hosts(owner, slots=slots)
        if not self.hosts:
            raise ClusterError("the Ray cluster has no live node to host runs on")
        for node, host in self.hosts.items():
            self._set_up(node, host)
        if registry is not None and definitions is not None:
            # on the registry's thread, inside the change: pushed before the change returns,
            # so every start decided after it finds the new definitions on its node
            self._unsubscribe = registry.subscribe(
                lambda _changes: self.push_definitions(list(definitions()))
            )

    # ---- starting --------------------------------------------------------------------------

    def _set_up(self, node: str, host: Any) -> None:
        """Hand ``host`` the kit (again, after a restart), connect its link, and let
        placement use its node."""
        ray = self._ray
        with self._lock:
            sending = self._sending.setdefault(node, threading.Lock())
        authkey = secrets.token_bytes(32)
        try:
            answer = ray.get(
                host.setup.remote(Travelling(self.kit), authkey, self.ports, self.tls),
                timeout=SETUP_TIMEOUT_S,
            )
            link = connect(tuple(answer["link"]), authkey, f"node host {node[:12]}", self.tls)
        except (ray.exceptions.RayError, LinkError) as exc:
            raise ClusterError(f"node host {node[:12]} could not be set up: {exc}") from exc
        if answer["pid"] == self._killed.get(node):
            # ray.kill is asynchronous: the call reached the process being killed, whose
            # link would close under the runs started again there (a second loss)
            link.close()
            raise _NotYet(f"node host {node[:12]}: the set-up reached the process being killed")
        info = answer["info"]
        with sending, self._lock:
            old = self._links.get(node)
            self._links[node] = link
            self._node_of[link] = node
            self._pids[node] = answer["pid"]
            self.addresses[node] = str(answer["link"][0])
            self._seq[node] = 0
            self.placement.add(node, info.slots, info.resources)
            self._offered[node] = dict(info.resources)
        self._recording.open(link)
        if old is not None:
            self._recording.close(old)
            self._node_of.pop(old, None)
            old.close()
        if self.kit.version:  # reloaded since the kit was made: in case the push missed it
            self._send_definitions(node)
        if self._placeable is not None:
            self._placeable()

    def push_definitions(self, specs: list[AgentSpec]) -> None:
        """The runtime's definitions changed (a reload, a definition registered) to
        ``specs``: when they differ from what the nodes have, every node gets them, as the
        next version, over its link (in order with the starts that follow)."""
        if self._closed.is_set():
            return
        with self._pushing:
            if specs == self.kit.agents:
                return
            self.kit.definitions(self.kit.version + 1, specs)
            log.info("definitions pushed to the nodes", version=self.kit.version)
            for node in list(self._links):
                self._send_definitions(node)

    def _send_definitions(self, node: str) -> None:
        with self._sending[node]:
            link = self._links.get(node)
            if link is not None:
                with contextlib.suppress(LinkError):  # its loss is the reader's to handle
                    link.send((DEFINITIONS, self.kit.version, self.kit.agents))

    def lease_line(self, left: Callable[[], float | None]) -> None:
        """The nodes' commands die by the runtime's lease line: ``left`` says how long it has
        left, which each node host asks again and again (``cluster/node_lease.py``)."""
        self._lease_left = left

    def effector(self, **kwargs: Any) -> RoutingEffector:
        """The supervisor's effector (``SupervisorActor(effector=...)``): its runs' agents
        on this runtime's nodes."""
        self.router = RoutingEffector(
            place=self.place,
            send=self.send,
            on_ended=self.ended,
            address_of=lambda node: self.addresses.get(node, ""),
            **kwargs,
        )
        return self.router

    def connect(self) -> None:
        """Start collecting what the nodes' agents send, for the supervisor of the effector
        made by ``effector`` (its pykka reference)."""
        router = self.router
        assert router is not None, "effector() first"
        self._supervisor = router.supervisor
        self._asks = NodeAsks(router.supervisor, self._answers)
        self._placeable = router.placeable
        for node, host in self.hosts.items():
            thread = threading.Thread(
                target=self._collect, args=(node, host), name=f"subagents-collect-{node[:8]}"
            )
            thread.daemon = True
            thread.start()
            self._threads.append(thread)

    # ---- the supervisor's side of the link ---------------------------------------------------

    def place(self, start: StartRun, parent_node: str | None) -> str | None:
        """The node for ``start``; None while only a lost node (whose host is coming back)
        offers what it needs; a ``PlacementError`` when no node of this runtime ever did."""
        needs = resource_needs(start.spec.metadata.get("resources"), agent=start.spec.name)
        with self._lock:
            try:
                node = self.placement.place(parent_node, needs)
            except PlacementError:
                if any(_offers(offered, needs) for offered in self._offered.values()):
                    return None
                raise
            self.placement.started(node)
            self.placed.setdefault(start.record.run_id, []).append(node)
        return node

    def ended(self, node: str) -> None:
        with self._lock:
            self.placement.ended(node)

    def send(self, node: str, effects: list[Effect]) -> None:
        """Send ``effects`` to ``node``'s host. A link that is down drops them: its reader
        declares the host lost (logged once there) and the runs they were for start again
        from the store, which has everything they would have carried."""
        link = self._links.get(node)
        if link is None:
            raise PlacementError(f"no host on node {node[:12]}")
        with self._sending[node]:  # numbered and sent together: the node applies them in order
            link = self._links[node]
            self._seq[node] = seq = self._seq.get(node, 0) + 1
            try:
                link.send((EFFECTS, seq, effects))
            except LinkError:  # expected while a loss is being handled: not an error
                log.debug("effects for a lost node host dropped", node=node, effects=len(effects))

    # ---- the nodes' side -------------------------------------------------------------------

    def _collect(self, node: str, host: Any) -> None:
        while not self._closed.is_set():
            link = self._links[node]
            silent = False
            try:
                items = link.receive(timeout=SILENT_S)
            except LinkError as exc:
                reason = str(exc)
            else:
                if items is not None:
                    self._hand_over(link, items)
                    continue
                # a live node beats every second: this one is frozen or cut off
                silent = True
                reason = f"the link to node host {node[:12]} was silent for {SILENT_S:.0f} s"
            if self._closed.is_set():
                return
            # a silent host is not asked who it is: it has not answered for SILENT_S, and
            # waiting FENCE_TIMEOUT_S more for it made the loss 40 s, not the 30 documented
            fenced = self._fence(node, host, ask=not silent)
            self._lost(node, host, reason, fenced)

    def _hand_over(self, link: LinkEnd, items: list[Any]) -> None:
        supervisor = self._supervisor
        for item in items:
            if type(item) is Told:
                if type(item.message) is FinishedCall:
                    self._record_call(item.message)
                    continue
                with contextlib.suppress(Exception):  # the supervisor stopped: closing
                    supervisor.tell(item.message)
            elif type(item) is Asked:
                kind = type(item.message)
                if kind is LeaseLeft:  # (a clock read: answered here, at once)
                    left = self._lease_left
                    _reply(link, Answer(item.key, value=left() if left is not None else None))
                elif kind is RecordMails or kind is RememberedRules:  # the store's, not queued
                    self._answers.submit(self._answer, link, item)
                elif self._asks is not None:  # queued now: nothing told after it overtakes it
                    self._asks.ask(item.key, item.message, functools.partial(_reply, link))

    def _record_call(self, call: FinishedCall) -> None:
        if self._on_call is None:
            return
        try:
            self._on_call(call)
        except Exception:  # a tracing failure never holds a node's reports back
            log.exception("recording a node's call span failed", run_id=call.run_id)

    def _answer(self, link: LinkEnd, asked: Asked) -> None:
        """Answer ``asked`` on the link it came by (a later set-up of the host numbers its
        asks from 1 again: an answer must not reach it)."""
        message = asked.message
        try:
            if type(message) is RecordMails:
                if self._record_mail is None:
                    raise RuntimeError("this runtime's senders do not record their mail")
                node = self._node_of.get(link, "?")
                with self._recording.recording(link, node) as check:
                    self._record_mail(message.mails, message.journal, check, message.attempt)
                value = None
            elif isinstance(message, RememberedRules):  # (the supervisor's asks: ``NodeAsks``)
                remembered = self._remembered
                # a list: msgpack gives a tuple back as a list, so a tuple would go pickled
                value = list(remembered(message.root_run_id)) if remembered is not None else []
            else:  # (``_hand_over`` sends only these two here)
                raise TypeError(f"not an ask of the store: {type(message).__name__}")
            answer = Answer(asked.key, value=value)
        except Exception as exc:
            answer = Answer(asked.key, error=f"{type(exc).__name__}: {exc}")
        _reply(link, answer)

    def _fence(self, node: str, host: Any, *, ask: bool = True) -> str:
        """``node``'s link closed (or fell silent). If the process it was set up in still
        runs (the link broke, not the process), frames may have been lost either way: kill
        it, so that its runs are only ever the ones started again elsewhere (Ray starts a
        new process). ``ask=False`` (a silent link): killed without asking which process
        runs, as one that does not answer is. What was done, for the loss's log line."""
        ray = self._ray
        pid = self._pids.get(node)
        if ask:
            try:
                pid = ray.get(host.describe.remote(), timeout=FENCE_TIMEOUT_S)["pid"]
            except ray.exceptions.GetTimeoutError:
                pass  # alive but not answering: fenced all the same
            except ray.exceptions.RayError:
                return "its process had ended"  # Ray starts it again
            if pid != self._pids.get(node):
                return "its process had been started again"
        if pid is not None:
            self._killed[node] = pid
        with contextlib.suppress(Exception):
            ray.kill(host, no_restart=False)
        return f"its process {pid} killed"

    def _lost(self, node: str, host: Any, reason: str, fenced: str) -> None:
        """``node``'s host is gone: its runs go elsewhere (one warning line says so); its
        restarted host is set up again (until that succeeds, or the runtime closes: a host
        that does not come back is logged once, not at every try)."""
        router = self.router
        assert router is not None
        # before the supervisor hears of the loss: every record of the node's mail either
        # committed already (its journal read for the replay sees it) or is refused
        self._recording.close(self._links[node])
        runs = router.lost(node, lambda: self.forget_node(node))
        log.warning(
            "node host lost; its runs start again elsewhere",
            node=node,
            reason=reason,
            fenced=fenced,
            moved=len(runs),
            run_ids=runs,
        )
        if runs:
            with contextlib.suppress(Exception):  # the supervisor stopped: closing
                self._supervisor.tell(HostLost(run_ids=tuple(runs), node=node, reason=reason))
        tries, warned = 0, False
        while not self._closed.is_set():
            tries += 1
            try:
                self._set_up(node, host)
            except ClusterError as exc:
                if not warned and not isinstance(exc, _NotYet):
                    warned = True
                    log.warning(
                        "node host not back yet; set up again every second until it is"
                        " (logged once)",
                        node=node,
                        error=str(exc)[:200],
                    )
                else:
                    log.debug("node host not back yet", node=node, tries=tries)
                self._closed.wait(1.0)
                continue
            log.info("node host set up again", node=node, tries=tries)
            return

    def forget_node(self, node: str) -> None:
        """Take ``node`` out of placement (called under the router's lock)."""
        with self._lock:
            self.placement.remove(node)

    def hosted(self) -> dict[str, list[str]]:
        """node -> the runs whose agents live there, once everything sent so far is applied."""
        ray = self._ray
        with self._lock:
            asked = {
                node: host.live.remote(self._seq.get(node, 0)) for node, host in self.hosts.items()
            }
        return {node: sorted(ray.get(ref, timeout=SETUP_TIMEOUT_S)) for node, ref in asked.items()}

    def placements(self) -> dict[str, list[str]]:
        """run id -> the nodes its starts were placed on, in order."""
        with self._lock:
            return {run_id: list(nodes) for run_id, nodes in self.placed.items()}

    # ---- closing -------------------------------------------------------------------------------

    def close(self, timeout: float = 10.0) -> None:
        """Stop every agent on every node, then the hosts themselves."""
        ray = self._ray
        self._closed.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
        closing = [host.close.remote() for host in self.hosts.values()]
        with contextlib.suppress(Exception):
            ray.wait(closing, num_returns=len(closing), timeout=timeout)
        for link in list(self._links.values()):
            link.close()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._answers.shutdown(wait=False, cancel_futures=True)
        for host in self.hosts.values():
            with contextlib.suppress(Exception):
                ray.kill(host)


class _NotYet(ClusterError):
    """A lost host's set-up reached its old process, still being killed: tried again."""


def _offers(offered: dict[str, float], needs: dict[str, float]) -> bool:
    return all(offered.get(name, 0.0) >= amount for name, amount in needs.items())


def _reply(link: LinkEnd, answer: Answer) -> None:
    """Send ``answer`` back on the link its ask came by (a closed link: nobody waits)."""
    with contextlib.suppress(LinkError):
        link.send((ANSWERS, 0, [answer]))
