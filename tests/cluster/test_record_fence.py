"""RecordFence (cluster/record_fence.py) on its own: which links' records pass their check,
and what a loss (``close``) waits for. No Ray, no threads: a record's block is entered and
left by the test."""

from __future__ import annotations

import pytest

from subagents.cluster.record_fence import RecordFence, RecordRefused


def test_a_closed_links_record_is_refused_an_open_ones_passes() -> None:
    fence = RecordFence()
    fence.open("a")
    with fence.recording("a", "node-a") as check:
        check()
    with fence.recording("b", "node-b") as check, pytest.raises(RecordRefused, match="node-b"):
        check()  # never opened
    assert fence.close("a", timeout=0)
    with fence.recording("a", "node-a") as check, pytest.raises(RecordRefused, match="lost"):
        check()


def test_a_loss_waits_for_the_records_past_their_check_not_for_those_before_it() -> None:
    fence = RecordFence()
    fence.open("a")
    before = fence.recording("a", "node-a")
    late = before.__enter__()  # on its way, not checked yet: the loss does not wait for it
    past = fence.recording("a", "node-a")
    check = past.__enter__()
    check()
    check()  # a retried transaction checks again: counted once
    assert not fence.close("a", timeout=0)  # still writing
    past.__exit__(None, None, None)
    assert fence.close("a", timeout=0)
    with pytest.raises(RecordRefused):
        late()  # its check, after the loss
    before.__exit__(None, None, None)
    assert fence.close("a", timeout=0)
