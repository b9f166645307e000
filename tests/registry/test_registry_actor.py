"""The registry actor with real threads: client calls, subscribers, concurrency, lifecycle."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from subagents.actors.registry import (
    RegistryCall,
    RegistryClient,
    RegistryUnavailableError,
)
from subagents.actors.timer import TimerService
from subagents.definitions.catalog import (
    Catalog,
    Changes,
    Requirements,
    UnknownAgentError,
)
from subagents.definitions.spec import AgentSpec

WAIT = 60.0


def spec(name: str, description: str = "does things", **kw: object) -> AgentSpec:
    return AgentSpec(name=name, description=description, prompt="p", **kw)  # type: ignore[arg-type]


@pytest.fixture
def registry() -> Iterator[RegistryClient]:
    client = RegistryClient.start(
        Catalog.from_specs(
            [
                spec("reviewer", "Reviews code", type="reviewer", capabilities=("review",)),
                spec("writer", "Writes docs", type="writer"),
                spec("lead", "Leads", key_sub_agents=("reviewer", "nobody")),
            ]
        ),
        timeout=WAIT,
    )
    yield client
    client.stop()


def test_client_answers_from_the_catalog(registry: RegistryClient) -> None:
    assert registry.names() == ("lead", "reviewer", "writer")
    assert registry.get("writer").description == "Writes docs"
    assert registry.has("lead") and not registry.has("ghost")
    assert [s.name for s in registry.list()] == ["lead", "reviewer", "writer"]
    assert [s.name for s in registry.by_type("reviewer")] == ["reviewer"]
    assert [s.name for s in registry.by_capability("review")] == ["reviewer"]
    assert registry.by_tier(1) == () and registry.by_category("x") == ()
    best = registry.find_best_match(Requirements(text="review my code"))
    assert best is not None and best.name == "reviewer"
    assert registry.rank(Requirements(type="writer"))[0].spec.name == "writer"
    assert registry.team("lead").missing == ("nobody",)
    assert [s.name for s in registry.define_group("g", ("writer",)).members] == ["writer"]
    assert registry.group("g").name == "g"
    assert registry.check_type_restriction("lead", "lead") is not None
    assert registry.stats().total == 3


def test_catalog_errors_come_through_unchanged(registry: RegistryClient) -> None:
    with pytest.raises(UnknownAgentError, match="did you mean: writer"):
        registry.get("writr")
    # the actor survives a failed ask
    assert registry.alive and registry.has("writer")


def test_unknown_message_and_method_are_refused(registry: RegistryClient) -> None:
    ref = registry._ref  # the raw ref: what another layer could send by mistake
    with pytest.raises(AttributeError, match="registry has no method '_apply'"):
        ref.ask(RegistryCall("_apply", ({},)), timeout=WAIT)
    with pytest.raises(TypeError, match="does not understand str"):
        ref.ask("hello", timeout=WAIT)
    assert registry.names() == ("lead", "reviewer", "writer")


def test_subscribers_run_on_the_actor_thread(registry: RegistryClient) -> None:
    got: list[tuple[Changes, str]] = []
    done = threading.Event()

    def listener(changes: Changes) -> None:
        got.append((changes, threading.current_thread().name))
        done.set()

    unsubscribe = registry.subscribe(listener)
    assert registry.register(spec("new")) == Changes(added=("new",))
    assert done.wait(WAIT)
    changes, thread_name = got[0]
    assert changes == Changes(added=("new",))
    assert thread_name != threading.current_thread().name
    assert "RegistryActor" in thread_name
    unsubscribe()
    unsubscribe()  # idempotent
    assert registry.unregister("new")
    assert len(got) == 1


def test_a_raising_subscriber_is_logged_and_others_still_hear(registry: RegistryClient) -> None:
    heard = threading.Event()

    def broken(_: Changes) -> None:
        raise RuntimeError("bug in a subscriber")

    registry.subscribe(broken)
    registry.subscribe(lambda changes: heard.set())
    registry.register(spec("another"))
    assert heard.wait(WAIT)
    assert registry.alive and registry.has("another")


def test_a_subscriber_calling_the_registry_fails_fast_instead_of_deadlocking(
    registry: RegistryClient,
) -> None:
    failures: list[BaseException] = []
    done = threading.Event()

    def reentrant(_: Changes) -> None:
        try:
            registry.names()
        except RuntimeError as exc:
            failures.append(exc)
        done.set()

    registry.subscribe(reentrant)
    registry.register(spec("trigger"))
    assert done.wait(WAIT)
    assert len(failures) == 1 and "would wait on itself" in str(failures[0])
    assert registry.has("trigger")  # the registry is fine, and other threads may call it


def test_many_concurrent_callers(registry: RegistryClient) -> None:
    """Readers on 16 threads while a writer registers and unregisters: every answer is whole."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            registry.register(spec(f"tmp-{i % 5}"))
            registry.unregister(f"tmp-{(i + 2) % 5}")
            i += 1

    def reader(n: int) -> int:
        seen = 0
        for _ in range(50):
            names = registry.names()
            assert {"lead", "reviewer", "writer"} <= set(names)
            assert registry.get("reviewer").type == "reviewer"
            match = registry.find_best_match(Requirements(type="writer"))
            assert match is not None and match.name == "writer"
            seen += len(names)
        return seen

    w = threading.Thread(target=lambda: _capture(writer, errors), name="writer")
    w.start()
    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            totals = list(pool.map(reader, range(16)))
    finally:
        stop.set()
        w.join(WAIT)
    assert not errors
    assert len(totals) == 16 and all(t >= 150 for t in totals)


def _capture(fn: Callable[[], None], errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        errors.append(exc)


def test_hot_reload_needs_the_timer(registry: RegistryClient) -> None:
    with pytest.raises(ValueError, match="needs the TimerService"):
        registry.start_hot_reload(0.05)


def test_hot_reload_rejects_a_bad_interval() -> None:
    timer = TimerService()
    client = RegistryClient.start(Catalog(), timer=timer, timeout=WAIT)
    try:
        with pytest.raises(ValueError, match="interval must be > 0 seconds, got 0"):
            client.start_hot_reload(0)
        assert timer.pending() == 0
    finally:
        client.stop()
        timer.stop()


def test_stopping_cancels_the_poll_and_later_calls_fail_clearly() -> None:
    timer = TimerService()
    client = RegistryClient.start(Catalog(), timer=timer, timeout=WAIT)
    client.start_hot_reload(60)
    assert timer.pending() == 1
    client.stop()
    assert timer.pending() == 0
    assert not client.alive
    with pytest.raises(RegistryUnavailableError, match="registry is not running"):
        client.names()
    client.stop()  # idempotent
    timer.stop()
