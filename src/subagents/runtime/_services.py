"""Services: the threads and services a Runtime starts, and their orderly end; and the
subscribers its events go to.

Why apart from the Runtime: what runs under a runtime (the timer, the pool of agent threads,
the registry and supervisor actors, the lease keeper, the tools' processes, telemetry) must
all end when it closes, or when its construction fails half way, in one order that nothing
can skip. The Runtime holds one ``Services`` (``Runtime._hosting``) and says what to
start; this knows how to stop.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence, Set
from pathlib import Path
from typing import Any, Protocol

from subagents.actors.agent import BehaviourFactory
from subagents.actors.effector import Effector
from subagents.actors.gc_pacing import PACING
from subagents.actors.mail_desk import MailDesk
from subagents.actors.pooled import Dispatcher
from subagents.actors.registry import RegistryActor, RegistryClient
from subagents.actors.remote import NodeMail
from subagents.actors.supervisor_client import SupervisorClient
from subagents.actors.threads import ThreadPool
from subagents.actors.timer import TimerService
from subagents.behaviour.port import AgentEnv, close_tool_services
from subagents.definitions.catalog import Catalog
from subagents.definitions.spec import AgentSpec
from subagents.isolation.worktrees import Worktrees
from subagents.logs import debug_enabled, get_logger
from subagents.mcp.hub import McpHub, mcp_start_timeout
from subagents.mcp.hub import mcp_tool_timeout as mcp_tool_timeout_of
from subagents.messages import (
    Event,
    EventKind,
    LeaseLost,
    Mail,
    PollCommands,
    Sweep,
    ToOutside,
)
from subagents.runtime._cluster_backend import ClusterBackend, NodeHosts
from subagents.runtime._lease_keeper import LeaseKeeper
from subagents.runtime._server_reach import check_nodes_reach
from subagents.store.base import MailRecording, RunStore
from subagents.store.fencing import FencedStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite_wal import StopCheckpoints
from subagents.store.writes import AttemptFence, SaveJournal
from subagents.supervision.core import SupervisorCore
from subagents.telemetry import Telemetry
from subagents.tools.lease_line import LeaseLine
from subagents.tools.processes import ProcessGroups
from subagents.tools.shell_limits import ShellLimits


class _Closable(Protocol):
    def close(self, timeout: float = ...) -> None: ...


log = get_logger("subagents.runtime")

CHECKPOINTS_WAIT_S = 5.0
"""The least a close waits for the store's log thread (``store.sqlite_wal``) to end, past
a deadline already spent: waking from its rest and leaving takes a loaded machine more than
a moment; only a pass that does not end in this long is left to end by itself."""


def _event_kinds(kinds: object) -> frozenset[EventKind]:
    """``kinds`` checked as a set of ``EventKind``s (a subscriber's filter), and copied."""
    if isinstance(kinds, str) or not isinstance(kinds, Set | Sequence):
        raise TypeError(f"kinds must be a set of EventKind, got {kinds!r}")
    known = {k.value for k in EventKind}
    unknown = [k for k in kinds if not isinstance(k, str) or k not in known]  # (a list: no hash)
    if unknown:
        raise ValueError(f"kinds: {', '.join(map(repr, unknown))}: no such EventKind")
    return frozenset(EventKind(k) for k in kinds)


class Subscribers:
    """The callbacks every event goes to (on the supervisor's thread), and the debug log."""

    def __init__(self) -> None:
        self._callbacks: tuple[tuple[Callable[[Event], None], Set[EventKind] | None], ...] = ()
        self.taking: list[dict[EventKind, tuple[Callable[[Event], None], ...]]] = [{}]
        """``[table]``: per kind, the callbacks that take it, in subscription order (kinds
        nobody takes absent), made again whole at each (un)subscribe; read by ``publish`` in
        one lookup, and by the effector (``heard``), which hands on only the events someone
        takes. Why: every run's transitions make ~5 events, most of them taken by nobody
        (the runtime's own ``Endings`` takes only the ends); each was a call here and a walk
        of every subscriber with its filter tested. A cell, its table replaced whole: who
        holds the cell reads the table current at each event."""
        self._changing = threading.Lock()
        """Held while the callbacks change and the table is made again: two at once (a
        program's threads; a subscriber unsubscribing on the supervisor's thread) each stored
        theirs, and the one stored last undid the other (a subscription lost, or an ended one
        back). ``publish`` reads the table as it is, unlocked."""

    def _change(
        self, callbacks: tuple[tuple[Callable[[Event], None], Set[EventKind] | None], ...]
    ) -> None:
        """The callbacks become ``callbacks``; the table is made from them (under the lock)."""
        self._callbacks = callbacks
        self.taking[0] = {
            kind: taking
            for kind in EventKind
            if (taking := tuple(c for c, kinds in callbacks if kinds is None or kind in kinds))
        }

    def subscribe(
        self, callback: Callable[[Event], None], kinds: Set[EventKind] | None = None
    ) -> Callable[[], None]:
        """Call ``callback(event)`` for every event, or only for those of ``kinds`` (a
        subscriber that reads only some is not called for the rest: the runtime's own
        ``Endings`` reads only a run's end, one of a trivial run's three events); returns a
        function that ends this subscription (only this one: the same callable subscribed
        again, for other kinds, stays). ``kinds`` is copied; one kind alone (a str: ``in``
        would test a substring) or a name of no kind is refused (``TypeError``,
        ``ValueError``), and so is a ``callback`` that cannot be called (``TypeError``:
        taken, it failed at every event, each logged)."""
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        if kinds is not None:
            kinds = _event_kinds(kinds)
        entry = (callback, kinds)
        with self._changing:
            self._change((*self._callbacks, entry))

        def unsubscribe() -> None:
            with self._changing:
                self._change(tuple(c for c in self._callbacks if c is not entry))

        return unsubscribe

    def wants(self, kind: EventKind) -> bool:
        """Whether an event of ``kind`` published now reaches anyone: the debug log is on,
        or a callback takes that kind. Why: an event nobody is handed need not be published
        at all (a straight mail's two events: ``Recorded.all`` asks once per line of
        records); the store keeps it whatever the answer."""
        return debug_enabled() or kind in self.taking[0]

    def heard(self) -> list[dict[EventKind, tuple[Callable[[Event], None], ...]]] | None:
        """The cell of the per-kind table (``taking``): an event whose kind it lacks would
        reach nobody, and need not be published; None while the debug log is on (every
        event is logged). Asked once per decision's effects (``Effector.apply``): the debug
        log's check costs ~1.5k instructions, an event handed to nobody ~2.8k."""
        return None if debug_enabled() else self.taking

    def publish(self, event: Event) -> None:
        """Log ``event`` (at debug) and hand it to every callback that takes its kind; one
        that raises is logged and skipped, a ``SystemExit`` too: it runs on the supervisor's
        thread, where pykka stops every actor of the process on a ``BaseException``."""
        if debug_enabled():  # checked first: a filtered-out debug call still costs (logs.py)
            log.debug(
                str(event.kind),
                run_id=event.run_id,
                parent_run_id=event.parent_run_id,
                root_run_id=event.root_run_id,
                agent=event.agent,
                depth=event.depth,
                **{k: v for k, v in event.data.items() if k not in ("input",)},
            )
        for callback in self.taking[0].get(event.kind, ()):
            try:
                callback(event)
            except BaseException:  # never the main thread: the runtime goes on serving
                _subscriber_failed(callback)


def _subscriber_failed(callback: object) -> None:
    """Log that ``callback`` raised (called in its ``except``), with as much as can be
    shown: a ``repr`` of it or a ``str`` of its error that raises in turn is not let out of
    ``publish``; it lost the event to every later subscriber, and a ``SystemExit`` there
    reached the supervisor's loop, which stopped every actor (tests/runtime/
    test_hostile_subscribers.py)."""
    try:
        shown = repr(callback)
    except BaseException:
        shown = f"<a {type(callback).__name__} whose repr raised>"
    try:
        log.exception("event subscriber failed", subscriber=shown)
    except BaseException:
        log.error("event subscriber failed; its error could not be shown", subscriber=shown)


class Definitions:
    """The agent definitions a runtime's runs are admitted against: the registry's, read
    again only after it reported a change (hot reload, a definition registered)."""

    def __init__(self, registry: RegistryClient) -> None:
        self.registry = registry
        self._specs: dict[str, AgentSpec] = {s.name: s for s in registry.list()}
        self._stale = False
        registry.subscribe(self._changed)

    def _changed(self, _changes: Any) -> None:
        self._stale = True

    def current(self) -> dict[str, AgentSpec]:
        if self._stale:
            self._stale = False
            self._specs = {s.name: s for s in self.registry.list()}
        return self._specs


AGENT_THREADS = ("shared", "own")
"""How live runs' agent actors get threads: ``shared`` (a few dispatcher threads drain the
mailboxes that have messages; a waiting run holds none) or ``own`` (each live run's actor loop
holds a pooled thread until the run ends: the earlier design, kept as an option)."""


class Services:
    """What a Runtime started; ``close`` ends it all, in order, within a timeout."""

    def __init__(self, agent_threads: str = "shared") -> None:
        if agent_threads not in AGENT_THREADS:
            raise ValueError(
                f"agent_threads must be one of {', '.join(AGENT_THREADS)}, not {agent_threads!r}"
            )
        self.timer = TimerService()
        self.pool = ThreadPool()
        """With ``agent_threads="own"``, agent actors run their loops on pooled threads
        (``actors/threads.py``), one held by each live run."""
        self.dispatcher = Dispatcher() if agent_threads == "shared" else None
        """With ``agent_threads="shared"``: agents hold no thread; their mailboxes are drained
        by its few threads when they have messages (``actors/pooled.py``)."""
        self.registry: RegistryClient | None = None
        self.catalog: Catalog | None = None
        """The registry's catalog: read only on the registry's thread (its subscribers)."""
        self.supervisor: SupervisorClient | None = None
        self.lease: LeaseKeeper | None = None
        self.fenced: FencedStore | None = None
        """The store as the supervisor writes it: every transaction checks the lease."""
        self.processes: ProcessGroups | None = None
        self.mcp: McpHub | None = None
        self.worktrees: Worktrees | None = None
        self.telemetry: Telemetry | None = None
        self.cluster: NodeHosts | None = None
        """The node hosts of a runtime on a cluster (``start_cluster``)."""
        self.listener: _Closable | None = None
        """What tells the supervisor of posted commands at once (``listen_for_commands``)."""
        # Every other thread the runtime starts, joined on close. Weak: an ended thread drops
        # out by itself, so tracking stays O(1) per run.
        self._threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._threads_lock = threading.Lock()
        self.supervisor_thread: threading.Thread | None = None
        self.checkpoints: StopCheckpoints | None = None
        """Stops the store's log checkpoints from a thread of their own, if it has them
        (``SQLiteStore.checkpoint_in_background``, ``store.sqlite_wal``)."""

    def agents_idle(self, timeout: float) -> bool:
        """Wait until no agent actor is handling a message (or running its loop, with
        ``agent_threads="own"``); False if ``timeout`` passed first. For tests that must know
        an agent's last report is on its way."""
        if self.dispatcher is not None:
            return self.dispatcher.wait_idle(timeout)
        return self.pool.wait_until(lambda c: c.threads == c.parked, timeout)

    def track_thread(self, thread: threading.Thread) -> None:
        with self._threads_lock:
            self._threads.add(thread)

    def track_supervisor_thread(self, thread: threading.Thread) -> None:
        self.supervisor_thread = thread
        self.track_thread(thread)

    def start_tool_services(
        self,
        root: Path,
        mcp_servers: Mapping[str, Any] | None,
        discover: bool,
        allow_mcp_commands: bool = False,
        mcp_tool_timeout: float | None = None,
        shell_limits: ShellLimits | None = None,
    ) -> tuple[ProcessGroups, McpHub, Worktrees]:
        """What runs' tools start and the runtime ends: process groups; MCP servers (started
        when a run first needs them; ``mcp_tool_timeout``: seconds per call, else
        ``$MCP_TOOL_TIMEOUT``); worktrees (when a run with ``isolation: worktree`` starts;
        docs/tools.md); ``shell_limits``: the background shells a run, and all, may hold."""
        call_timeout = mcp_tool_timeout_of(mcp_tool_timeout)  # a bad value starts nothing
        self.processes = ProcessGroups(shell_limits=shell_limits)
        self.mcp = McpHub.from_config(
            mcp_servers,
            discover=discover,
            cwd=root,
            start_timeout=mcp_start_timeout(),
            allow_commands=bool(allow_mcp_commands),
            call_timeout=call_timeout,
        )
        self.worktrees = Worktrees(root)
        return self.processes, self.mcp, self.worktrees

    def start_registry(self, catalog: Catalog, hot_reload_s: float | None) -> RegistryClient:
        """The registry actor over ``catalog`` (reloading it every ``hot_reload_s``)."""
        self.catalog = catalog
        self.registry = RegistryClient(
            RegistryActor.start(catalog, timer=self.timer, on_thread=self.track_thread)
        )
        if hot_reload_s:
            self.registry.start_hot_reload(hot_reload_s)
        return self.registry

    def start_supervisor(
        self,
        core: SupervisorCore,
        store: RunStore,
        behaviour_for: Callable[[AgentSpec], BehaviourFactory],
        on_outside: Callable[[ToOutside], None],
        events: Subscribers,
    ) -> SupervisorClient:
        """The supervisor actor over ``core``, its agents' loops on the pool (or, on a
        cluster, in the node hosts: ``start_cluster`` first), its events to ``events`` (a
        straight mail's published only if someone wants them: the core was made with
        ``events.wants``, ``supervisor_core``). It writes through a fence
        (``store.fencing``), armed by ``keep_lease``: once the lease is taken, nothing more."""
        extra: dict[str, Any] = {}
        self.fenced = fenced = FencedStore(store)
        if self.cluster is not None:  # runs on nodes: their mail is the node hosts' concern
            extra["effector"] = self.cluster.effector
        elif (recording := store.mail_recording()) is not MailRecording.NONE:
            runs = core.runs  # runs take their mail straight to each other (actors/mail_desk.py)
            desk = MailDesk(
                limits=core.limits,
                generation=lambda: runs.generation,
                record=fenced.record_mails if recording is MailRecording.SENDER else None,
            )
            extra["effector"] = functools.partial(Effector, mail=desk)
            background = getattr(store, "checkpoint_in_background", None)
            if recording is MailRecording.SENDER and background is not None:
                self.checkpoints = background()  # not in a sender's commit (store.sqlite_wal)
        # its events handed on only when someone takes them (``Subscribers.heard``)
        extra["effector"] = functools.partial(extra.get("effector", Effector), heard=events.heard)
        self.supervisor = SupervisorClient.start(
            core=core,
            store=self.fenced,
            timer=self.timer,
            behaviour_for=behaviour_for,
            on_outside=on_outside,
            on_event=events.publish,
            on_thread=self.track_supervisor_thread,
            pool=self.pool,
            dispatcher=self.dispatcher,
            **extra,
        )
        if self.cluster is not None:
            self.cluster.connect()
        return self.supervisor

    def start_cluster(
        self,
        backend: ClusterBackend,
        owner: str,
        functions: Mapping[str, Callable[..., Any]],
        env: AgentEnv,
        store: RunStore,
    ) -> NodeHosts:
        """One node host per node of the cluster this process joined (``backend``), each
        set up with what runs need (the function agents, the agent environment, the
        definitions as they are now, then as each reload of the registry makes them, and
        the runtime's ``behaviours`` to run them with): the runs will live there. Mail
        between two runs of one node goes straight there unless ``store`` keeps mail only
        through the supervisor (``RunStore.mail_recording``: NONE); where senders record
        it, the nodes' senders have the driver write it (the supervisor's fenced store)."""
        from subagents.runtime._assembly import behaviours  # it does not import this one

        check_nodes_reach(backend.on_every_node, env, store)  # each node's runs' commands
        catalog = self.catalog
        limits = env.spawn_rules.limits
        recording = store.mail_recording()
        senders = recording is MailRecording.SENDER
        self.cluster = backend.node_hosts(
            owner,
            functions,
            env,
            behaviours,
            registry=self.registry,
            definitions=catalog.list if catalog is not None else None,
            on_call=self.telemetry.record_call if self.telemetry is not None else None,
            mail=None if recording is MailRecording.NONE else NodeMail(limits, senders),
            record_mail=self._record_mail if senders else None,
        )
        return self.cluster

    def _record_mail(
        self,
        mails: Sequence[Mail],
        journal: SaveJournal | None,
        also: Callable[[], None],
        attempt: AttemptFence | None,
    ) -> None:
        """A node's sender's mails, and the journal entries it carries with them, written
        through the fence (``start_supervisor`` made it: no run sends before), ``also`` (that
        the sender's node was not declared lost: ``cluster.record_fence``) and that the
        sender's start ``attempt`` is still its run's checked in the same transaction."""
        assert self.fenced is not None
        self.fenced.record_mails(mails, journal, attempt, also)

    def keep_lease(self, store: RunStore, owner: str, lease_s: float) -> None:
        """Write this runtime's lease and keep it alive; from now on the supervisor's writes
        (through ``self.fenced``) are refused once the lease is not held (``store.fencing``); if
        another process takes its runs over (the lease lapsed), the supervisor is also told
        to stop at its next renewal. Its commands are given its lease line
        (``tools.lease_line``): they die before the lease can be taken, the host stalled. Not
        on a ``MemoryStore``: no other process can take its runs (a sibling runtime of this
        process is stalled with it), so a line could only kill commands of a host that was
        suspended or stopped (Ctrl-Z) and goes on, which nobody could have taken over."""
        supervisor = self.supervisor
        assert supervisor is not None
        takeable = not isinstance(store, MemoryStore)
        line = LeaseLine() if self.processes is not None and takeable else None
        try:
            self.lease = LeaseKeeper(
                store,
                owner,
                lease_s,
                on_lost=lambda reason: supervisor.tell(LeaseLost(reason=reason)),
                line=line,
            )
        except BaseException:
            if line is not None:
                line.close()
            raise
        if self.processes is not None and line is not None:  # published: commands may hold it
            self.processes.lease_env = line.environment
            if self.cluster is not None:  # the node hosts' commands: the same line
                self.cluster.lease_line(line.left)
            if self.mcp is not None:  # (stdio servers: named by its /proc link)
                self.mcp.lease_env = line.named_environment
                if not self.mcp.lease_env:
                    log.warning(
                        "this runtime's /proc/PID/fd is not its user's (not dumpable) or not"
                        " its own (a /proc of another PID namespace): its stdio MCP servers"
                        " get no lease line, and a stalled host's servers outlive its lease"
                    )
        assert self.fenced is not None
        self.fenced.fence = self.lease.fence

    def start_polls(
        self, key: Hashable, command_poll_s: float, sweep: Sweep, sweep_s: float
    ) -> None:
        """The supervisor's periodic work: the commands other processes post through the
        store (stop, send, an approval's answer), every ``command_poll_s``, and at once
        where the store tells of them (``listen_for_commands``); the sweeper (archiving
        finished runs, on the supervisor: the one writer), every ``sweep_s``."""
        if command_poll_s > 0:
            self.every(("commands", key), command_poll_s, PollCommands())
            if self.fenced is not None:
                self.listen_for_commands(self.fenced.store)
        if sweep_s > 0:
            self.every(("sweep", key), sweep_s, sweep)

    def poll(self, message: Any) -> None:
        """Tell the supervisor ``message`` now, if it is running (a poll made at once)."""
        if self.supervisor is not None:
            self.supervisor.tell(message)

    def every(self, key: Hashable, seconds: float, message: Any) -> None:
        """Tell the supervisor ``message`` every ``seconds`` (the next tell is armed once the
        last one was taken in), until it stops."""
        supervisor, timer = self.supervisor, self.timer
        assert supervisor is not None

        def tick() -> None:
            if supervisor.tell(message):
                timer.schedule_in(key, seconds, tick)

        timer.schedule_in(key, seconds, tick)

    def listen_for_commands(self, store: RunStore) -> None:
        """Where the store can say when a command was posted (PostgreSQL's ``LISTEN``:
        ``listen_commands``), the supervisor is told to take its commands at once, not only
        at its next poll (which stays: a notice missed while the listener reconnected)."""
        listen = getattr(store, "listen_commands", None)
        supervisor = self.supervisor
        if listen is None or supervisor is None:
            return
        self.listener = listen(lambda: supervisor.tell(PollCommands()))

    def stop_threads(self, timeout: float) -> float:
        """Cancel every run, then end the supervisor, the registry, the timer, the pool, the
        tools' processes and every tracked thread; the time left of ``timeout``."""
        deadline = time.monotonic() + timeout
        try:
            self._stop_runs(deadline)
        finally:  # (whatever failed above: the log's thread is not left to the store's close)
            if self.checkpoints is not None:  # every sender has stopped
                self.checkpoints(max(CHECKPOINTS_WAIT_S, deadline - time.monotonic()))
        if self.processes is not None:
            self.processes.kill_all()  # whatever a run's tools left running ends with it
        self._close_tools(max(0.5, deadline - time.monotonic()))
        with self._threads_lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return max(0.0, deadline - time.monotonic())

    def _stop_runs(self, deadline: float) -> None:
        """The supervisor (it cancels every run), the node hosts, the registry, the timer
        and the agents' threads, by ``deadline``."""
        timeout = max(0.0, deadline - time.monotonic())
        with PACING.holding():  # what the GC pacing froze stays frozen until every run ended
            if self.listener is not None:
                self.listener.close(timeout)
            held_by = None  # what spent the close's timeout before the agents' threads
            if self.supervisor is not None:
                self.supervisor.close(timeout)
                if time.monotonic() >= deadline:
                    held_by = "the supervisor's thread (a subscriber callback or the runs' ending)"
            if self.cluster is not None:  # every run was cancelled: the node hosts go
                self.cluster.close(max(1.0, deadline - time.monotonic()))
            if self.registry is not None:
                with contextlib.suppress(Exception):
                    self.registry.stop()
            self.timer.stop()
            busy: list[threading.Thread] = []  # the agents' threads left in a handling
            waited = max(0.0, deadline - time.monotonic())
            if self.dispatcher is not None:
                busy += self.dispatcher.close(waited)
        busy += self.pool.close(max(0.0, deadline - time.monotonic()))
        if busy:
            _warn_busy(busy, waited, held_by)

    def _close_tools(self, timeout: float) -> None:
        """Worktrees of runs that did not end (removed if unchanged, else kept and logged),
        then every MCP server process and the MCP event loop thread."""
        close_tool_services(self.worktrees, self.mcp, timeout)

    def release(self, timeout: float) -> None:
        """Once every run has ended: the lease goes (nothing left to host), the traces are
        flushed (every run span has ended)."""
        if self.lease is not None:
            self.lease.close(timeout)
        if self.telemetry is not None:
            try:
                self.telemetry.close()
            except Exception:
                log.exception("closing the tracer provider failed")


def _warn_busy(busy: list[threading.Thread], waited: float, held_by: str | None) -> None:
    """Say what the close left behind (a Python thread cannot be interrupted): threads still
    busy after the time they were given, or, when the steps before them spent the whole
    timeout (``waited`` 0: ``held_by``, else the other services' closes), threads not
    waited for at all, which may be idle ones that had no time to end."""
    names = [thread.name for thread in busy]
    if waited > 0.0:
        log.warning(
            f"the runtime closed with {len(busy)} thread(s) still busy after its timeout:"
            " a function agent, tool or callback that does not return (its run was"
            " cancelled; the call goes on in this process until it returns)",
            threads=len(busy),
            names=names,
        )
        return
    log.warning(
        f"the runtime closed with {len(busy)} thread(s) not waited for: the close's timeout"
        f" was spent before the agents' threads were given any, by"
        f" {held_by or 'the services closed before them'}; they end on their own once"
        " their handling returns",
        threads=len(busy),
        names=names,
        held_by=held_by,
    )
