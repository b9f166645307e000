"""``console.admission.Admission``: the owner's connections and strangers' counted apart, and
which stranger's connection goes when they are too many. A plain class: tested with strings
for connections, no server."""

from __future__ import annotations

from subagents.console.admission import Admission


def _admission(owners: int = 2, strangers: int = 3) -> Admission[str]:
    return Admission(owners=owners, strangers=strangers)


def test_strangers_never_take_the_owners_slots() -> None:
    admission = _admission(owners=2, strangers=3)
    for i in range(10):
        admission.opened(f"s{i}", "127.0.0.1")
    admission.opened("o1", "127.0.0.1")
    admission.opened("o2", "127.0.0.1")
    assert admission.shows_token("o1") and admission.shows_token("o2")
    assert admission.shows_token("o1")  # a second request on an owner's connection
    admission.opened("o3", "127.0.0.1")
    assert not admission.shows_token("o3")  # the owner's slots are all taken: 503
    admission.closed("o1")
    assert admission.shows_token("o3")


def test_past_the_bound_the_oldest_of_the_peer_holding_the_most_goes() -> None:
    admission = _admission(strangers=3)
    admission.opened("owner-idle", "10.0.0.1")  # the oldest of all, from another address
    for i in range(3):
        admission.opened(f"flood{i}", "10.0.0.9")
    assert admission.to_close(lambda _: True) == "flood0"
    admission.closed("flood0")
    assert admission.to_close(lambda _: True) is None  # back at the bound


def test_one_that_may_not_be_closed_is_skipped_and_none_when_none_may() -> None:
    admission = _admission(strangers=1)
    admission.opened("answering", "127.0.0.1")
    admission.opened("idle", "127.0.0.1")
    assert admission.to_close(lambda conn: conn != "answering") == "idle"
    assert admission.to_close(lambda _: False) is None  # over the bound for a moment


def test_another_peers_connection_is_never_closed_for_the_flooding_one() -> None:
    admission = _admission(strangers=2)
    admission.opened("owner-idle", "10.0.0.1")
    admission.opened("fresh1", "10.0.0.9")
    admission.opened("fresh2", "10.0.0.9")
    # the flood's connections had no chance yet: none goes, not the owner's instead
    assert admission.to_close(lambda conn: conn == "owner-idle") is None
    assert admission.to_close(lambda _: True) == "fresh1"


def test_an_owners_connection_is_no_stranger_and_closing_twice_is_harmless() -> None:
    admission = _admission(owners=1, strangers=1)
    admission.opened("o", "127.0.0.1")
    admission.opened("s", "127.0.0.1")
    assert admission.shows_token("o")
    assert admission.stranger_count == 1
    assert admission.to_close(lambda _: True) is None
    admission.closed("s")
    admission.closed("s")
    admission.closed("o")
    assert admission.stranger_count == 0 and not admission.owners and not admission.strangers


def test_a_connection_closed_before_its_request_is_looked_at_takes_no_owners_slot() -> None:
    # its client went between the request's head and the look at its token: admitted, it
    # held an owner's slot for ever (--max-connections of them and the owner got 503)
    admission = _admission(owners=1)
    admission.opened("gone", "127.0.0.1")
    admission.closed("gone")
    assert not admission.shows_token("gone")
    admission.opened("o", "127.0.0.1")
    assert admission.shows_token("o")
