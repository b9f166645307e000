"""The bounds on what one client may hold of the console, and for how long (docs/console.md,
"Limits"): the numbers ``subagents serve`` is started with. ``protocol.py`` enforces those of
connections (uvicorn's HTTP/1.1 protocol with the deadlines it lacks), ``app.Console`` those of
streams and request bodies. Free of uvicorn, so the command reads its options without the
``console`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

DEFAULT_CONNECTIONS = 128
DEFAULT_STREAMS = 32
DEFAULT_STRANGERS = 256
ECHO_CHARS = 100
"""The most characters of a value from a request an error quotes (``clipped``)."""
ERROR_CHARS = 2000
"""The most characters of an error's message the console answers (the net under
``clipped``: what a layer below quoted of a request)."""
ACCEPT_BATCH = 128
"""The listening socket's backlog, which is also how many connections asyncio accepts at
one turn of the loop (uvicorn's default, 2048): a flood of strangers' connections is then
accepted a batch at a time, each batch's oldest closed (``admission.py``) before the next
comes, so the connections held stay a few hundred. Accepted 2048 at a time, a flood
opened more sockets than a default limit of open files (1024) allows: asyncio then logged
a traceback per failed accept on serve's terminal (thousands) and stopped accepting for a
second at a time, the owner's page among the refused."""
HEAD_BYTES = 16 * 1024
"""The most bytes of a request line and headers (h11's default, set here so it is known):
the console's own requests send well under 2 KiB."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """The bounds the console is served with (``serve --max-connections/--max-streams``)."""

    connections: int = DEFAULT_CONNECTIONS
    """Open connections of the owner (a request with the token came on them) answered; past
    it, 503 (``--max-connections``)."""
    strangers: int = DEFAULT_STRANGERS
    """Open connections no request with the token came on yet; past it, a new one closes
    one of them that had its chance (``admission.Admission``)."""
    streams: int = DEFAULT_STREAMS
    """Open change streams (``/api/stream``, one a page); past it, 503 (``--max-streams``)."""
    head_timeout_s: float = 10.0
    """How long a connection has to send a whole request head."""
    stall_timeout_s: float = 20.0
    """How long a response may wait for its client to read before the connection is reset."""
    body_timeout_s: float = 30.0
    """How long a write's body has to arrive whole (the application answers 408 past it)."""


def clipped(value: str) -> str:
    """``value`` as an error quotes it: whole up to ``ECHO_CHARS`` characters, else its
    start and how long it was. A request's values are a stranger's to choose (a filter of
    16 KiB): an answer, or a line logged, that echoed them whole would carry what they
    chose."""
    if len(value) <= ECHO_CHARS:
        return value
    return f"{value[:ECHO_CHARS]}... (clipped: {len(value)} characters in all)"


def capped(message: str) -> str:
    """``message`` as the console answers it: at most ``ERROR_CHARS`` characters, whatever
    a layer below quoted (a run id in a lookup's error), and how long it was."""
    if len(message) <= ERROR_CHARS:
        return message
    return f"{message[:ERROR_CHARS]}... (clipped: {len(message)} characters in all)"


def named_damage(rows: Iterable[tuple[str | None, str]]) -> dict[str, str]:
    """Damaged rows (each one's key, what is wrong) as the API names them (``/api/runs``'
    and ``/api/approvals?v=2``'s ``damaged``): key -> what is wrong. A damaged row's key is
    whoever edited the file's to choose (a 1 MB id): it is clipped as an error quotes a
    request's value (``clipped``), in what is wrong too (which quotes it), and that is
    ``capped``. Every row keeps an entry: two whose names would be one (keys alike in their
    first ``ECHO_CHARS`` characters, or no key) are both named, the later numbered
    ``(2)``, ``(3)``."""
    named: dict[str, str] = {}
    for key, message in rows:
        name = "(no key)" if key is None else clipped(key)
        if key is not None and name != key:
            message = message.replace(key, name)
        unique, n = name, 1
        while unique in named:
            n += 1
            unique = f"{name} ({n})"
        named[unique] = capped(message)
    return named
