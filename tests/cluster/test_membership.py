"""Membership: every loss of a node host's incarnation is reported once, whichever signal
comes first (Ray's death notice, missed heartbeats, the host registering again)."""

from __future__ import annotations

import pytest

from subagents.cluster.membership import Lost, Membership, NodeInfo


def info(node: str = "n1", slots: int = 10) -> NodeInfo:
    return NodeInfo(node=node, host="h", slots=slots, resources={"gpu": 1.0})


def test_join_beat_and_members_in_join_order() -> None:
    m = Membership(timeout_s=5)
    one, lost = m.join(info("n1"), now=0)
    two, _ = m.join(info("n2"), now=1)
    assert lost is None and two > one
    assert [x.info.node for x in m.members()] == ["n1", "n2"]
    assert m.beat("n1", one, now=4) is True
    assert m.expired(now=5.5) == []  # n1 seen at 4, n2 at 1: 4.5 s ago, within 5
    assert m.resources() == {"n1": {"gpu": 1.0}, "n2": {"gpu": 1.0}}


def test_a_death_notice_is_reported_once_and_later_signals_find_nothing() -> None:
    m = Membership(timeout_s=5)
    inc, _ = m.join(info(), now=0)
    assert m.lost("n1", inc, "actor died") == Lost(node="n1", incarnation=inc, reason="actor died")
    assert m.lost("n1", inc, "actor died") is None
    assert m.expired(now=100) == []
    assert m.beat("n1", inc, now=1) is False  # the lost incarnation must register again
    assert m.members() == []


def test_missed_heartbeats_expire_a_member_once() -> None:
    m = Membership(timeout_s=5)
    inc, _ = m.join(info(), now=0)
    m.join(info("n2"), now=0)
    m.beat("n2", 2, now=9)
    (gone,) = m.expired(now=10)
    assert (gone.node, gone.incarnation) == ("n1", inc)
    assert "no heartbeat for 10.0 s (timeout 5 s)" in gone.reason
    assert m.expired(now=10) == []
    assert m.lost("n1", inc, "late notice") is None


def test_registering_again_reports_the_previous_incarnation_lost() -> None:
    m = Membership()
    first, _ = m.join(info(), now=0)
    second, lost = m.join(info(), now=1)
    assert lost == Lost(
        node="n1", incarnation=first, reason="its host registered again (restarted)"
    )
    assert second != first
    assert m.beat("n1", first, now=2) is False
    assert m.beat("n1", second, now=2) is True
    assert m.lost("n1", first, "late death notice of the old one") is None
    assert m.is_member("n1", second)


def test_leaving_on_purpose_reports_no_loss() -> None:
    m = Membership()
    inc, _ = m.join(info(), now=0)
    assert m.leave("n1", inc) is True
    assert m.leave("n1", inc) is False
    assert m.expired(now=1000) == []


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="heartbeat timeout must be positive"):
        Membership(timeout_s=0)
    with pytest.raises(ValueError, match="node 'n1': slots must be at least 1, got 0"):
        Membership().join(info(slots=0), now=0)
