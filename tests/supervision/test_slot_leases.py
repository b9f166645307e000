"""Leases of slots (a design, not wired yet): the supervisor never lends out more than the
limit leaves, a lost node's lease comes back once, and late answers change nothing."""

from __future__ import annotations

import itertools
import random

import pytest

from subagents.supervision.slot_leases import Lease, LeasedSlots, SlotLender


def test_lending_never_goes_past_the_limit() -> None:
    lender = SlotLender(10)
    assert lender.take_central() and lender.take_central()
    assert lender.lend("a", 5) == Lease("a", 5, 1)
    assert lender.lend("b", 5) == Lease("b", 3, 1)  # only 3 were free
    assert lender.free == 0
    assert not lender.take_central()
    assert lender.lend("a", 4) == Lease("a", 5, 1)  # nothing more to lend
    lender.release_central()
    assert lender.lend("a", 4) == Lease("a", 6, 1)


def test_a_lost_nodes_lease_comes_back_once_and_its_old_epoch_is_refused() -> None:
    lender = SlotLender(8)
    lender.lend("a", 6)
    assert lender.take_back("a") == 6
    assert lender.take_back("a") == 0
    assert lender.free == 8
    assert not lender.give_back("a", 1, 2)  # the lost lease returning slots: refused
    assert lender.lend("a", 2) == Lease("a", 2, 2)  # lent again under a new epoch
    assert not lender.give_back("a", 1, 1)
    assert lender.give_back("a", 2, 2)
    assert lender.lease("a") is None and lender.free == 8


def test_returning_more_than_is_held_is_refused() -> None:
    lender = SlotLender(4)
    lender.lend("a", 2)
    assert not lender.give_back("a", 1, 3)
    assert lender.lease("a") == Lease("a", 2, 1)


def test_a_node_asks_below_low_and_returns_above_high() -> None:
    slots = LeasedSlots(Lease("a", 3, 1), low=2, high=4)
    assert slots.wanted() == 0 and slots.returning() == 0
    assert slots.take() and slots.take()
    assert slots.spare == 1 and slots.wanted() == 3
    slots.renewed(Lease("a", 6, 1))
    assert slots.spare == 4 and slots.wanted() == 0
    assert slots.take() and slots.take() and slots.take() and slots.take()
    assert not slots.take()  # the lease is used up: ask the supervisor
    for _ in range(slots.used):
        slots.release()
    assert slots.returning() == 2
    slots.returned(2)
    assert slots.lease == Lease("a", 4, 1)
    slots.renewed(Lease("a", 9, 0))  # an answer to an older lease, late: ignored
    assert slots.lease == Lease("a", 4, 1)
    with pytest.raises(ValueError, match="cannot return 5 slots"):
        slots.returned(5)


def test_nodes_and_the_supervisor_together_never_use_more_than_the_limit() -> None:
    """Random interleavings of central starts, local starts, ends, asks, returns and losses:
    the slots in use, everywhere together, never exceed the limit."""
    rng = random.Random(16)
    for _trial in range(200):
        limit = rng.randint(1, 12)
        lender = SlotLender(limit)
        nodes: dict[str, LeasedSlots] = {}
        central = 0
        for _step in range(100):
            action = rng.choice(
                ["central", "end_central", "local", "end_local", "ask", "return", "lose"]
            )
            name = rng.choice("abc")
            node = nodes.get(name)
            if action == "central" and lender.take_central():
                central += 1
            elif action == "end_central" and central:
                lender.release_central()
                central -= 1
            elif action == "local" and node is not None:
                node.take()
            elif action == "end_local" and node is not None and node.used:
                node.release()
            elif action == "ask":
                want = node.wanted() if node is not None else 2
                lease = lender.lend(name, max(want, 1))
                if node is None or lease.epoch > node.lease.epoch:
                    nodes[name] = LeasedSlots(lease, low=1, high=3)
                else:
                    node.renewed(lease)
            elif action == "return" and node is not None and node.returning():
                n = node.returning()
                if lender.give_back(name, node.lease.epoch, n):
                    node.returned(n)
            elif action == "lose" and node is not None:
                lender.take_back(name)
                del nodes[name]
            in_use = central + sum(n.used for n in nodes.values())
            assert in_use <= limit
            assert all(n.used <= n.lease.slots for n in nodes.values())
            assert lender.central + lender.lent <= limit


@pytest.mark.parametrize(("low", "high"), list(itertools.product([-1, 3], [3, 2])))
def test_bad_water_marks_are_refused(low: int, high: int) -> None:
    with pytest.raises(ValueError, match="need 0 <= low < high"):
        LeasedSlots(Lease("a", 1, 1), low=low, high=high)
