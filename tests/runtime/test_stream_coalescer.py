"""The coalescer's bounds, counted on a known stream with a clock the test moves: at most one
report per interval (plus the last), every character reported once, at most ``max_chars`` per
report (the end kept, the rest counted), and a failed attempt reported void once."""

from __future__ import annotations

from typing import Any

from subagents.behaviour.streaming import Coalescer
from subagents.messages import Streamed


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def coalescer(clock: Clock, **kwargs: float) -> tuple[Coalescer, list[Streamed]]:
    sent: list[Streamed] = []
    return Coalescer(sent.append, run_id="r1", turn=2, clock=clock, **kwargs), sent  # type: ignore[arg-type]


def text_of(reports: list[Streamed]) -> str:
    return "".join(p.text for r in reports for p in r.parts)


def test_one_report_per_interval_and_the_last() -> None:
    clock = Clock()
    sink, sent = coalescer(clock, interval=0.25)
    for i in range(100):  # 100 deltas, 1/16 s apart (exact in binary): 6.25 s of streaming
        sink.text(f"{i:03d}")
        clock.now += 0.0625
    sink.close(failed=False)
    # at t=0, 0.25, ... 6.0 (deltas 0, 4, ... 96): 25 reports, then deltas 97-99 at close
    assert len(sent) == 26 == sink.reports
    assert [r.seq for r in sent] == list(range(1, 27))
    assert text_of(sent) == "".join(f"{i:03d}" for i in range(100))
    assert all(r.turn == 2 and r.run_id == "r1" and not r.void for r in sent)


def test_a_fast_stream_is_still_one_report_per_interval() -> None:
    clock = Clock()
    sink, sent = coalescer(clock, interval=0.25)
    for _ in range(1000):  # 1000 deltas within one interval
        sink.text("x")
        clock.now += 0.0001
    sink.close(failed=False)
    assert len(sent) == 2  # the first at once, the rest at the end
    assert text_of(sent) == "x" * 1000


def test_a_report_keeps_the_end_and_counts_what_it_left_out() -> None:
    clock = Clock()
    sink, sent = coalescer(clock, interval=10.0, max_chars=10)
    sink.text("first")  # reported at once
    for i in range(10):
        sink.text(f"<{i:02d}>")  # 40 characters more, within the interval
    sink.close(failed=False)
    assert len(sent) == 2
    assert text_of(sent[1:]) == "07><08><09>"[-10:]
    assert sent[1].skipped == 30


def test_text_and_tool_input_are_parts_in_order() -> None:
    clock = Clock()
    sink, sent = coalescer(clock, interval=10.0)
    sink.text("a")
    sink.text("Let me read it.")
    sink.tool_input("Read", '{"file_')
    sink.tool_input("Read", 'path": "x"}')
    sink.tool_input("Grep", "{}")
    sink.close(failed=False)
    assert [(p.kind, p.tool, p.text) for r in sent for p in r.parts] == [
        ("text", None, "a"),
        ("text", None, "Let me read it."),
        ("tool_input", "Read", '{"file_path": "x"}'),
        ("tool_input", "Grep", "{}"),
    ]


def test_a_void_attempt_is_reported_once_and_its_pending_pieces_dropped() -> None:
    clock = Clock()
    sink, sent = coalescer(clock, interval=10.0)
    sink.text("half of a")
    sink.text(" reply that breaks")  # pending: never reported
    sink.void()
    sink.void()  # nothing shown since the last void: nothing more to say
    sink.text("the whole reply")
    sink.close(failed=False)
    assert [(r.void, text_of([r])) for r in sent] == [
        (False, "half of a"),
        (True, ""),
        (False, "the whole reply"),
    ]


def test_a_call_that_fails_voids_what_it_showed_and_nothing_else() -> None:
    clock = Clock()
    sink, sent = coalescer(clock)
    sink.close(failed=True)
    assert sent == []  # nothing was shown: nothing to take back
    sink.text("shown")
    sink.close(failed=True)
    assert [r.void for r in sent] == [False, True]


def test_a_piece_that_waits_is_sent_when_the_interval_is_over() -> None:
    """A model that stalls in mid-sentence: what came after the last report is sent by the
    timer (``later``), once, at the end of the interval, not held until the next piece."""
    clock = Clock()
    timers: list[tuple[float, Any]] = []
    sent: list[Streamed] = []
    sink = Coalescer(sent.append, run_id="r1", turn=1, clock=clock, interval=0.25,
                     later=lambda seconds, call: timers.append((seconds, call)))  # fmt: skip
    sink.text("Looking")  # reported at once
    clock.now = 0.0625
    sink.text(" at the")
    clock.now = 0.125
    sink.text(" code")  # the timer is armed once for both
    assert text_of(sent) == "Looking" and len(timers) == 1
    seconds, due = timers[0]
    assert seconds == 0.1875  # from t=0.0625 to the end of the interval begun at t=0
    clock.now = 0.25
    due()  # the timer fires (the stalled model sent nothing more)
    assert text_of(sent) == "Looking at the code" and len(sent) == 2
    due()  # nothing left: nothing sent
    sink.text(" now")  # armed again, then the call ends first
    assert len(timers) == 2
    sink.close(failed=False)
    assert text_of(sent) == "Looking at the code now" and len(sent) == 3
    timers[1][1]()  # due after the end of the call: nothing more
    assert len(sent) == 3
