"""The GC pacing (``actors/gc_pacing.py``): while the process holds many live runs, what
survives a full GC pass is frozen, and given back to the collector when the runs end or the
runtime closes, so nothing that dies stays uncollected. Real runtimes and real collections;
the threshold is lowered for the test (and restored)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from polling import wait_until
from subagents.actors.gc_pacing import PACING, THRESHOLD, YOUNG_GROWTH
from subagents.behaviour.function import AgentContext
from subagents.messages import EXTERNAL_SENDER, Event, EventKind, RunStatus
from subagents.runtime import RunHandle, Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events

MANY = 60
"""Live runs in these tests; the threshold is set below it."""


class Marker:
    """An object of a run's, in a cycle with itself: only the cyclic GC can free it."""

    def __init__(self) -> None:
        self.me = self


MARKERS: list[weakref.ref[Marker]] = []


async def idle(ctx: AgentContext) -> str:
    marker = Marker()
    MARKERS.append(weakref.ref(marker))
    mail = await ctx.receive(timeout=WAIT * 6)
    del marker  # dies in its cycle when the run ends
    return "mail" if mail is not None else "none"


@pytest.fixture
def low_threshold() -> Iterator[None]:
    MARKERS.clear()
    PACING.threshold = MANY - 20
    try:
        yield
    finally:
        PACING.threshold = THRESHOLD
        gc.unfreeze()
        MARKERS.clear()


def _start_waiting(rt: Runtime, n: int) -> list[RunHandle]:
    events = Events()
    rt.subscribe(events)
    handles = [rt.spawn("idle", str(i)) for i in range(n)]
    events.wait_count(EventKind.WAITING, "idle", n)
    return handles


def _limits() -> Limits:
    return Limits(max_concurrency=MANY * 2, per_agent=MANY * 2, queue_bound=MANY * 2)


def test_many_live_runs_are_frozen_and_given_back_when_they_end(low_threshold: None) -> None:
    with Runtime([idle], limits=_limits()) as rt:
        handles = _start_waiting(rt, MANY)
        gc.collect()  # a full pass, with more live runs than the threshold
        assert PACING.frozen and gc.get_freeze_count() > 0
        assert len(MARKERS) == MANY and all(ref() is not None for ref in MARKERS)
        assert len(rt.stop_all(requester=EXTERNAL_SENDER)) == MANY
        for handle in handles:
            assert handle.result(timeout=WAIT).status is RunStatus.CANCELLED
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        wait_until(lambda: dispatcher.live == 0, "every run's actor stopped")
        gc.collect()  # the runs ended: what is frozen is given back ...
        assert not PACING.frozen and gc.get_freeze_count() == 0
        gc.collect()  # ... and the next pass frees the cycles that died frozen (but those
        # of the last actor each dispatcher thread drained: it holds it until its next one)
        assert sum(1 for ref in MARKERS if ref() is not None) <= dispatcher.size


def test_closing_the_runtime_gives_everything_back(low_threshold: None) -> None:
    rt = Runtime([idle], limits=_limits())
    try:
        _start_waiting(rt, MANY)
        gc.collect()
        assert PACING.frozen and gc.get_freeze_count() > 0
    finally:
        rt.close()
    assert not PACING.frozen and gc.get_freeze_count() == 0
    gc.collect()
    assert [ref() for ref in MARKERS] == [None] * MANY


def test_a_close_gives_nothing_back_until_its_dispatcher_has_closed(low_threshold: None) -> None:
    """A full pass in the middle of a close, once nearly every run has ended (the rule that
    gives back what is frozen once half the runs frozen ended is met), gives nothing back:
    the pass after it would walk everything still frozen, inside the close. It is given back
    once the dispatcher has closed, in one thaw."""
    rt = Runtime([idle], limits=_limits())
    seen: list[object] = []
    try:
        _start_waiting(rt, MANY)
        gc.collect()
        assert PACING.frozen
        thaws, held = PACING.thaws, PACING.held_passes
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        stopped_before, cancelled = dispatcher.stopped, [0]

        def mid_close(event: Event) -> None:
            if event.kind is not EventKind.CANCELLED:
                return
            cancelled[0] += 1
            if cancelled[0] < MANY:
                return
            try:  # the last run's end: every other run's agent was told to stop before it
                stopped = lambda: dispatcher.stopped - stopped_before >= MANY - 1  # noqa: E731
                wait_until(stopped, "every other run's agent stopped")
                gc.collect()
                seen.append((PACING.frozen, PACING.thaws - thaws, PACING.held_passes - held))
            except Exception as exc:  # (a subscriber's exception is only logged)
                seen.append(exc)

        rt.subscribe(mid_close)
    finally:
        rt.close()
    assert seen == [(True, 0, 1)]
    assert not PACING.frozen and PACING.thaws == thaws + 1 and gc.get_freeze_count() == 0
    gc.collect()
    assert [ref() for ref in MARKERS] == [None] * MANY


def test_what_survives_a_middle_pass_is_frozen_too(low_threshold: None) -> None:
    """Once something is frozen, a middle (generation 1) pass's survivors join it: no full
    pass walks them again."""
    with Runtime([idle], limits=_limits()) as rt:
        _start_waiting(rt, MANY)
        gc.collect()
        assert PACING.frozen
        freezes = PACING.middle_freezes
        kept = [Marker() for _ in range(1000)]  # alive: what a middle pass finds alive
        gc.collect(1)
        assert PACING.middle_freezes > freezes
        assert PACING.frozen
        ids = {id(marker) for marker in kept}  # frozen: in no generation a pass walks
        assert not any(id(o) in ids for o in gc.get_objects())
        gc.collect(1)  # a freeze resets CPython's counts: the next full pass never comes
        assert gc.get_count()[2] == 0  # by itself while frozen (what the rules look after)


def test_runs_ended_give_back_what_is_frozen_at_a_middle_pass(low_threshold: None) -> None:
    """The rules that give back what is frozen are looked at after a middle pass too (no
    full pass comes by itself while something is frozen): half the runs ended, it is."""
    with Runtime([idle], limits=_limits()) as rt:
        _start_waiting(rt, MANY)
        gc.collect()
        assert PACING.frozen
        thaws = PACING.thaws
        assert len(rt.stop_all(requester=EXTERNAL_SENDER)) == MANY
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        wait_until(lambda: dispatcher.live == 0, "every run's actor stopped")
        gc.collect(1)
        assert not PACING.frozen and PACING.thaws == thaws + 1
        assert gc.get_freeze_count() == 0


def test_middle_passes_count_towards_giving_back_anyway(low_threshold: None) -> None:
    """``REFRESH``: what is frozen goes back after that many full passes, a middle pass
    counted as CPython's share of one (``gc.get_threshold()[2] + 1`` of them to a full pass)."""
    refresh, PACING.refresh = PACING.refresh, 1
    gc.disable()  # only the passes made here: the first of them freezes, none counted yet
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY)
            gc.collect()
            assert PACING.frozen
            for _ in range(gc.get_threshold()[2]):
                gc.collect(1)
            assert PACING.frozen  # (fewer middle passes than one full pass's share)
            gc.collect(1)
            assert not PACING.frozen and gc.get_freeze_count() == 0
    finally:
        gc.enable()
        PACING.refresh = refresh


def test_middle_passes_while_runs_start_do_not_count_towards_giving_back(
    low_threshold: None,
) -> None:
    """A middle pass made while the live runs grew is not counted towards ``REFRESH``
    (CPython makes no full pass while the long-lived objects grow fast): a start of
    100,000 runs made REFRESH's share of middle passes and gave everything back at its end.
    Once the runs stop growing, middle passes count again."""
    refresh, PACING.refresh = PACING.refresh, 1
    share = gc.get_threshold()[2] + 1  # middle passes to one full pass
    gc.disable()  # only the passes made here
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY - share)
            gc.collect()
            assert PACING.frozen
            for _ in range(share):  # each middle pass after one more run started
                _start_waiting(rt, 1)
                gc.collect(1)
            assert PACING.frozen  # none of them counted
            for _ in range(share):  # the runs no longer grow: a full pass's share
                gc.collect(1)
            assert not PACING.frozen and gc.get_freeze_count() == 0
    finally:
        gc.enable()
        PACING.refresh = refresh


def test_below_the_threshold_nothing_is_frozen() -> None:
    MARKERS.clear()
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY)  # far below the default threshold
            gc.collect()
            assert not PACING.frozen and gc.get_freeze_count() == 0
    finally:
        MARKERS.clear()


def test_waves_of_runs_give_back_what_each_froze(low_threshold: None) -> None:
    """A long-lived runtime where runs come and go in waves: each wave is frozen while it
    lives and given back once it ended, so nothing frozen piles up wave after wave."""
    with Runtime([idle], limits=_limits()) as rt:
        dispatcher = rt._hosting.dispatcher
        assert dispatcher is not None
        for wave in range(5):
            MARKERS.clear()
            handles = _start_waiting(rt, MANY)
            gc.collect()
            assert PACING.frozen and gc.get_freeze_count() > 0, wave
            assert len(rt.stop_all(requester=EXTERNAL_SENDER)) == MANY
            for handle in handles:
                assert handle.result(timeout=WAIT).status is RunStatus.CANCELLED
            wait_until(lambda: dispatcher.live == 0, "every run's actor stopped")
            gc.collect(1)  # a middle pass: half the frozen runs ended, all is given back
            assert not PACING.frozen and gc.get_freeze_count() == 0, wave
            gc.collect()
            assert sum(1 for ref in MARKERS if ref() is not None) <= dispatcher.size, wave


def test_the_runs_of_a_closed_runtime_count_as_ended(low_threshold: None) -> None:
    """Two runtimes in one process, more live runs than the threshold in each: the second
    closes, every run of it ended. Those ends count towards giving back what is frozen
    (half the runs live at the freeze ended), though its dispatcher is gone: left
    uncounted, its dead actors stayed frozen until ``REFRESH`` passes."""
    with Runtime([idle], limits=_limits()) as staying:
        _start_waiting(staying, MANY)
        going = Runtime([idle], limits=_limits())
        try:
            _start_waiting(going, MANY)
            gc.collect()
            assert PACING.frozen
        finally:
            going.close()
        gc.collect(1)  # the rules are looked at again
        assert not PACING.frozen and gc.get_freeze_count() == 0


def test_what_survives_a_young_pass_is_frozen_while_the_runs_grow(low_threshold: None) -> None:
    """Once something is frozen, a young (generation 0) pass's survivors join it while runs
    start in bulk (``YOUNG_GROWTH`` more live than at the young pass before: walked once,
    not again by the middle pass); while the live runs hold steady they are left to the
    middle pass."""
    gc.disable()  # only the passes made here
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY)
            gc.collect()
            assert PACING.frozen
            freezes = PACING.young_freezes
            _start_waiting(rt, YOUNG_GROWTH)  # the runs grew (in bulk)
            kept = [Marker() for _ in range(100)]
            gc.collect(0)
            ids = {id(marker) for marker in kept}  # frozen: in no generation a pass walks
            assert not any(id(o) in ids for o in gc.get_objects())
            assert PACING.young_freezes == freezes + 1
            steady = [Marker() for _ in range(100)]  # the runs did not grow since
            gc.collect(0)
            assert PACING.young_freezes == freezes + 1
            ids = {id(marker) for marker in steady}  # left to the middle pass
            assert len(ids & {id(o) for o in gc.get_objects(1)}) == len(steady)
            gc.collect(1)
            assert not any(id(o) in ids for o in gc.get_objects())  # it froze them
    finally:
        gc.enable()


def test_a_young_pass_freezes_nothing_once_what_is_frozen_is_due_back(
    low_threshold: None,
) -> None:
    """Runs keep starting after the pacing was turned off (``threshold = None``: what is
    frozen is due back): a young pass freezes nothing more (a freeze resets CPython's
    counts: the middle pass that gives it back would not come while the runs grow), and the
    next middle pass gives everything back."""
    gc.disable()  # only the passes made here
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY)
            gc.collect()
            assert PACING.frozen
            PACING.threshold = None
            _start_waiting(rt, YOUNG_GROWTH)  # the runs grew (in bulk)
            kept = [Marker() for _ in range(100)]
            gc.collect(0)
            ids = {id(marker) for marker in kept}
            assert len(ids & {id(o) for o in gc.get_objects(1)}) == len(kept)  # not frozen
            gc.collect(1)
            assert not PACING.frozen and gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_a_young_pass_freezes_nothing_while_a_runtime_closes(low_threshold: None) -> None:
    """While a runtime closes (``holding``) the live runs fall, and what a young pass finds
    alive is mostly what the close is taking apart: left to the middle pass, even if another
    runtime's runs grew meanwhile."""
    gc.disable()  # only the passes made here
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY)
            gc.collect()
            assert PACING.frozen
            freezes = PACING.young_freezes
            with PACING.holding():
                _start_waiting(rt, YOUNG_GROWTH)  # the runs grew (in bulk)
                kept = [Marker() for _ in range(100)]
                gc.collect(0)
                ids = {id(marker) for marker in kept}
                assert len(ids & {id(o) for o in gc.get_objects(1)}) == len(kept)
            assert PACING.young_freezes == freezes and PACING.frozen
    finally:
        gc.enable()


def test_a_young_pass_freezes_nothing_when_the_runs_grew_by_a_few(low_threshold: None) -> None:
    """A job that starts runs steadily, a few between two young passes: their survivors are
    mostly what is in flight (here the embedding program's own short-lived cycles), left to
    the middle pass, not frozen at every young pass (where those that died would wait for
    the thaw: a job that only grows never thaws)."""
    gc.disable()  # only the passes made here
    try:
        with Runtime([idle], limits=_limits()) as rt:
            _start_waiting(rt, MANY)
            gc.collect()
            assert PACING.frozen
            freezes = PACING.young_freezes
            for _ in range(3):  # a few more runs at each young pass: never YOUNG_GROWTH
                _start_waiting(rt, YOUNG_GROWTH - 1)
                in_flight = [Marker() for _ in range(100)]
                gc.collect(0)
                ids = {id(marker) for marker in in_flight}
                assert len(ids & {id(o) for o in gc.get_objects(1)}) == len(in_flight)
                assert PACING.young_freezes == freezes
    finally:
        gc.enable()
