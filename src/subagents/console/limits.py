"""The bounds on what one client may hold of the console, and for how long (docs/console.md,
"Limits"): the numbers ``subagents serve`` is started with. ``protocol.py`` enforces those of
connections (uvicorn's HTTP/1.1 protocol with the deadlines it lacks), ``app.Console`` those of
streams and request bodies. Free of uvicorn, so the command reads its options without the
``console`` extra.
"""

from __future__ import annotations

import msgspec

DEFAULT_CONNECTIONS = 128
DEFAULT_STREAMS = 32
DEFAULT_STRANGERS = 256
ECHO_CHARS = 100
"""The most characters of a value from a request an error quotes (``clipped``)."""
ERROR_CHARS = 2000
"""The most characters of an error's message the console answers (the net under
``clipped``: what a layer below quoted of a request)."""
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
