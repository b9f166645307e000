"""The registry actor: one pykka actor that owns the Catalog, and the client other layers hold.

Why an actor: the catalog changes (hot reload, definitions registered at run time) while
supervisors and agents on other threads read it. Owning it on one thread means no locks in the
catalog and a consistent view per question. The actor is thin: every message calls one Catalog
method (the logic and its tests live in ``subagents.definitions.catalog``).

Hot reload polls through the one shared ``TimerService``: a timer callback only ``tell``s the
actor, the reload itself runs on the actor's thread, and the next poll is scheduled when that
reload is done (a slow reload never piles up ticks). No thread per file or per registry.

``RegistryClient`` is what the rest of the program uses: typed methods, our own exceptions
(``TimeoutError``, ``RegistryUnavailableError``), no pykka types in its signatures.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from typing import Any, Final

import msgspec
import pykka

from subagents.actors.inbox import FastInboxActor
from subagents.actors.timer import TimerService
from subagents.definitions.catalog import (
    Catalog,
    CatalogStats,
    Changes,
    Group,
    Requirements,
    Scored,
    Team,
)
from subagents.definitions.errors import LoadIssue
from subagents.definitions.spec import AgentSpec
from subagents.logs import get_logger

log = get_logger("subagents.registry")

DEFAULT_ASK_TIMEOUT: Final = 10.0

# Catalog methods a RegistryCall may name (everything else is refused, not attempted).
CALLABLE_METHODS: Final = frozenset(
    {
        "get",
        "has",
        "names",
        "list",
        "by_type",
        "by_tier",
        "by_capability",
        "by_category",
        "rank",
        "find_best_match",
        "define_group",
        "group",
        "groups",
        "remove_group",
        "team",
        "check_type_restriction",
        "stats",
        "issues",
        "shadowed",
        "register",
        "unregister",
        "reload",
    }
)


# ---------------------------------------------------------------------------------------------
# Messages (immutable; a call names a Catalog method so another backend can serialize it)
# ---------------------------------------------------------------------------------------------


class RegistryCall(msgspec.Struct, frozen=True):
    """Call ``Catalog.<method>(*args)`` on the actor thread and reply with its result."""

    method: str
    args: tuple[Any, ...] = ()


class Subscribe(msgspec.Struct, frozen=True):
    """Add a subscriber; the reply is a token for ``Unsubscribe``."""

    callback: Callable[[Changes], None]


class Unsubscribe(msgspec.Struct, frozen=True):
    token: int


class StartHotReload(msgspec.Struct, frozen=True):
    interval_s: float


class StopHotReload(msgspec.Struct, frozen=True):
    pass


class ReloadTick(msgspec.Struct, frozen=True):
    """Sent by the timer; ``generation`` drops ticks of a hot reload since stopped/restarted."""

    generation: int


class RegistryUnavailableError(RuntimeError):
    """The registry actor is not running (stopped, or never started)."""


_actor_ids = itertools.count()
_on_actor_thread = threading.local()  # .urn: the registry whose thread this is


class RegistryActor(FastInboxActor):
    """Owns one Catalog (hand it over: nobody else may touch it after) and answers for it."""

    use_daemon_thread = True  # a program that forgets Runtime.close() must still exit

    def __init__(
        self,
        catalog: Catalog,
        *,
        timer: TimerService | None = None,
        on_thread: Callable[[threading.Thread], None] | None = None,
    ) -> None:
        super().__init__()
        self._catalog = catalog
        self._timer = timer
        self._on_thread = on_thread
        self._timer_key = ("registry-hot-reload", next(_actor_ids))
        self._interval: float | None = None
        self._generation = 0
        self._unsubscribers: dict[int, Callable[[], None]] = {}
        self._tokens = itertools.count()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, RegistryCall):
            if message.method not in CALLABLE_METHODS:
                raise AttributeError(f"registry has no method {message.method!r}")
            return getattr(self._catalog, message.method)(*message.args)
        if isinstance(message, ReloadTick):
            self._on_tick(message.generation)
            return None
        if isinstance(message, Subscribe):
            token = next(self._tokens)
            self._unsubscribers[token] = self._catalog.subscribe(message.callback)
            return token
        if isinstance(message, Unsubscribe):
            unsubscribe = self._unsubscribers.pop(message.token, None)
            if unsubscribe is not None:
                unsubscribe()
            return unsubscribe is not None
        if isinstance(message, StartHotReload):
            self._start_hot_reload(message.interval_s)
            return None
        if isinstance(message, StopHotReload):
            self._stop_hot_reload()
            return None
        raise TypeError(f"registry does not understand {type(message).__name__}")

    def on_start(self) -> None:
        if self._on_thread is not None:  # so that its owner can join the thread on close
            self._on_thread(threading.current_thread())
        _on_actor_thread.urn = self.actor_urn

    def on_stop(self) -> None:
        self._stop_hot_reload()

    # -- hot reload ----------------------------------------------------------------------------

    def _start_hot_reload(self, interval_s: float) -> None:
        if self._timer is None:
            raise ValueError("hot reload needs the TimerService: RegistryActor(..., timer=...)")
        if not interval_s > 0:
            raise ValueError(f"hot reload interval must be > 0 seconds, got {interval_s!r}")
        self._interval = float(interval_s)
        self._generation += 1
        log.info("hot reload started", interval_s=self._interval)
        self._schedule_tick()

    def _stop_hot_reload(self) -> None:
        if self._interval is not None:
            log.info("hot reload stopped")
        self._interval = None
        self._generation += 1
        if self._timer is not None:
            self._timer.cancel(self._timer_key)

    def _schedule_tick(self) -> None:
        assert self._timer is not None and self._interval is not None
        ref = self.actor_ref
        tick = ReloadTick(self._generation)

        def on_timer() -> None:  # runs on the timer thread: only tell
            with contextlib.suppress(pykka.ActorDeadError):  # stopped: nobody to tell
                ref.tell(tick)

        self._timer.schedule_in(self._timer_key, self._interval, on_timer)

    def _on_tick(self, generation: int) -> None:
        if generation != self._generation or self._interval is None:
            return  # a tick of a hot reload that has since been stopped or restarted
        try:
            self._catalog.reload()
        except Exception:
            # A tell that raises would stop the actor; a bad reload must not take it down.
            log.exception("hot reload failed; keeping the previous definitions")
        self._schedule_tick()


class RegistryClient:
    """A typed facade over the registry actor; safe to share between threads.

    Every method asks the actor and waits at most ``timeout`` seconds (``TimeoutError``);
    errors raised by the catalog (``UnknownAgentError``...) are raised here unchanged.
    """

    def __init__(self, ref: Any, *, timeout: float = DEFAULT_ASK_TIMEOUT) -> None:
        self._ref = ref
        self._timeout = timeout

    @classmethod
    def start(
        cls,
        catalog: Catalog,
        *,
        timer: TimerService | None = None,
        timeout: float = DEFAULT_ASK_TIMEOUT,
    ) -> RegistryClient:
        """Start a RegistryActor owning ``catalog`` and return its client."""
        return cls(RegistryActor.start(catalog, timer=timer), timeout=timeout)

    def stop(self) -> None:
        """Stop the actor (and its hot reload); idempotent."""
        self._ref.stop(block=True, timeout=self._timeout)

    @property
    def alive(self) -> bool:
        return bool(self._ref.is_alive())

    # -- lookup and matching -------------------------------------------------------------------

    def get(self, name: str) -> AgentSpec:
        result: AgentSpec = self._call("get", name)
        return result

    def has(self, name: str) -> bool:
        return bool(self._call("has", name))

    def names(self) -> tuple[str, ...]:
        result: tuple[str, ...] = self._call("names")
        return result

    def list(self) -> tuple[AgentSpec, ...]:
        result: tuple[AgentSpec, ...] = self._call("list")
        return result

    def by_type(self, type_: str) -> tuple[AgentSpec, ...]:
        result: tuple[AgentSpec, ...] = self._call("by_type", type_)
        return result

    def by_tier(self, tier: int) -> tuple[AgentSpec, ...]:
        result: tuple[AgentSpec, ...] = self._call("by_tier", tier)
        return result

    def by_capability(self, capability: str) -> tuple[AgentSpec, ...]:
        result: tuple[AgentSpec, ...] = self._call("by_capability", capability)
        return result

    def by_category(self, category: str) -> tuple[AgentSpec, ...]:
        result: tuple[AgentSpec, ...] = self._call("by_category", category)
        return result

    def rank(self, requirements: Requirements, limit: int | None = None) -> tuple[Scored, ...]:
        result: tuple[Scored, ...] = self._call("rank", requirements, limit)
        return result

    def find_best_match(self, requirements: Requirements) -> AgentSpec | None:
        result: AgentSpec | None = self._call("find_best_match", requirements)
        return result

    def define_group(self, name: str, members: tuple[str, ...]) -> Group:
        result: Group = self._call("define_group", name, tuple(members))
        return result

    def group(self, name: str) -> Group:
        result: Group = self._call("group", name)
        return result

    def team(self, name: str) -> Team:
        result: Team = self._call("team", name)
        return result

    def check_type_restriction(self, parent: str, child: str) -> str | None:
        result: str | None = self._call("check_type_restriction", parent, child)
        return result

    def stats(self) -> CatalogStats:
        result: CatalogStats = self._call("stats")
        return result

    def issues(self) -> tuple[LoadIssue, ...]:
        """The loader's warnings and errors from the last load or reload."""
        result: tuple[LoadIssue, ...] = self._call("issues")
        return result

    # -- changes -------------------------------------------------------------------------------

    def register(self, spec: AgentSpec) -> Changes:
        result: Changes = self._call("register", spec)
        return result

    def unregister(self, name: str) -> bool:
        return bool(self._call("unregister", name))

    def reload(self) -> Changes:
        result: Changes = self._call("reload")
        return result

    def subscribe(self, callback: Callable[[Changes], None]) -> Callable[[], None]:
        """``callback(changes)`` runs on the registry's thread after each change: keep it short
        (tell an actor, set an event) and do not call the registry from it (``RuntimeError``:
        it would wait on itself). Returns a function that unsubscribes (idempotent)."""
        token: int = self._ask(Subscribe(callback))

        def unsubscribe() -> None:
            with contextlib.suppress(RegistryUnavailableError):  # a stopped registry calls nobody
                self._ask(Unsubscribe(token))

        return unsubscribe

    def start_hot_reload(self, interval_s: float) -> None:
        """Poll the definition files every ``interval_s`` seconds (restarts if running)."""
        self._ask(StartHotReload(interval_s))

    def stop_hot_reload(self) -> None:
        self._ask(StopHotReload())

    # -- plumbing ------------------------------------------------------------------------------

    def _call(self, method: str, *args: Any) -> Any:
        return self._ask(RegistryCall(method, args))

    def _ask(self, message: Any) -> Any:
        if getattr(_on_actor_thread, "urn", None) == self._ref.actor_urn:
            # a subscriber calling back in would wait on its own thread until the timeout
            raise RuntimeError(
                f"registry {_describe(message)} called from the registry's own thread (from a "
                "subscriber?): it would wait on itself; tell another actor instead"
            )
        try:
            return self._ref.ask(message, timeout=self._timeout)
        except pykka.Timeout as exc:
            raise TimeoutError(
                f"registry did not answer {_describe(message)} within {self._timeout} s"
            ) from exc
        except pykka.ActorDeadError as exc:
            raise RegistryUnavailableError(
                f"registry is not running (asked {_describe(message)})"
            ) from exc


def _describe(message: Any) -> str:
    if isinstance(message, RegistryCall):
        return message.method
    return type(message).__name__
