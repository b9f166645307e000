"""The console extends uvicorn's internal HTTP/1.1 protocol (``console/protocol.py``): the
parts it builds on are checked before ``serve`` starts, so a uvicorn release that changed
them is refused with their names, not met as an error on each connection."""

from __future__ import annotations

import asyncio

from subagents.console import protocol


def test_the_installed_uvicorn_has_every_part_the_console_extends() -> None:
    assert protocol.uvicorn_problem() is None


def test_a_uvicorn_without_those_parts_is_refused_naming_each() -> None:
    said = protocol.uvicorn_problem(protocol=asyncio.Protocol, connection=object, flow=object)
    assert said is not None
    for part in (
        "H11Protocol.handle_events",
        "H11Protocol.on_response_complete",
        "H11Protocol's cycle",
        "H11Protocol's conn",
        "h11.Connection.trailing_data",
        "FlowControl's write_paused",
    ):
        assert part in said
