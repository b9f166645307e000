"""A host's lease line renewed by a test thread, as a live host's lease keeper renews it
(``tools/lease_line.py``): shared by the tests of what dies at the line (Bash commands and
hooks, stdio MCP servers)."""

from __future__ import annotations

import threading

from subagents.tools.lease_line import LeaseLine, clock

LEAD_S = 3.0
"""How far ahead the renewals put the line (a starved test thread is not a lapse). A reaper
sleeps until the line it read: a line published only far ahead is read again only then."""


def renewing(line: LeaseLine) -> tuple[threading.Event, threading.Thread]:
    """A thread that renews ``line`` (``LEAD_S`` ahead) until the event is set."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(0.1):
            line.publish(clock() + LEAD_S)

    thread = threading.Thread(target=renew, daemon=True)
    thread.start()
    return stop, thread
