"""What a streaming model writes, coalesced into a few ``Streamed`` reports a second.

Why coalesce on the run's thread: a model streams tens of deltas a second; one report (one
supervisor message, one ``text_delta`` event, one preview write) per delta would cost every
run of a big tree more than its model call. The coalescer keeps the pieces that came since
its last report and sends them along when ``interval`` has passed since then, checked as
each piece comes (no thread of its own: the model call it runs inside is the run's). A
piece that has to wait is sent when the interval is over by the runtime's one timer thread
(``later``), so a model that stalls in mid-sentence still shows its last words. So a run
sends at most one report per ``interval``, plus one at the end of the call; at most
``max_chars`` characters are kept between two (the end: a viewer wants the latest), the
rest counted as ``skipped``.

A failed attempt (``void``: the backend retries it) and a call that fails for good are
reported at once as ``void``: what the viewers showed of the attempt is gone, and the step
that is recorded in the end holds only what the attempt that succeeded wrote.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from subagents.messages import Streamed, StreamedPart

INTERVAL_S = 0.25
"""The least time between two reports of one run (at most four a second)."""
MAX_CHARS = 4000
"""The most characters one report carries (what came beyond, before them, is skipped)."""


class Coalescer:
    """A ``StreamSink`` (``models/base.py``) for one model call of one run: the pieces
    sent on as ``Streamed`` reports through ``send``, at most one per ``interval``."""

    def __init__(
        self,
        send: Callable[[Streamed], None],
        *,
        run_id: str,
        turn: int,
        clock: Callable[[], float] = time.monotonic,
        interval: float = INTERVAL_S,
        max_chars: int = MAX_CHARS,
        later: Callable[[float, Callable[[], None]], None] | None = None,
    ) -> None:
        """``later(seconds, fn)``: call ``fn`` after ``seconds`` on another thread (the
        runtime's timer), to send what waited for the interval to pass; None: it waits for
        the next piece or the end of the call."""
        self._send = send
        self._later = later
        self._lock = threading.Lock()
        self._armed = False
        self._closed = False
        self._run_id = run_id
        self._turn = turn
        self._clock = clock
        self._interval = interval
        self._max_chars = max_chars
        self._parts: list[StreamedPart] = []
        self._chars = 0
        self._skipped = 0
        self._seq = 0
        self._last: float | None = None
        self._shown = False
        """Something of the attempt under way was sent (a void must then be said)."""

    # ---- the StreamSink protocol ------------------------------------------------------------

    def text(self, text: str) -> None:
        self._add("text", text, None)

    def tool_input(self, tool: str, partial_json: str) -> None:
        self._add("tool_input", partial_json, tool)

    def void(self) -> None:
        """The attempt under way failed and is tried again: what came of it is void."""
        with self._lock:
            self._void()

    def _void(self) -> None:
        self._parts, self._chars, self._skipped = [], 0, 0
        if self._shown:
            self._report(void=True)
            self._shown = False

    # ---- the end of the call ------------------------------------------------------------

    def close(self, *, failed: bool) -> None:
        """The call returned (what is kept is sent) or failed (what was shown is void)."""
        with self._lock:
            self._closed = True
            if failed:
                self._void()
            elif self._parts:
                self._report()

    def _due(self) -> None:
        """The interval after the last report is over (on the timer's thread)."""
        with self._lock:
            self._armed = False
            if not self._closed and self._parts:
                self._report()

    @property
    def reports(self) -> int:
        """How many reports were sent."""
        return self._seq

    # ---- inside -------------------------------------------------------------------------

    def _add(self, kind: str, text: str, tool: str | None) -> None:
        if not text:
            return
        with self._lock:
            self._take(kind, text, tool)

    def _take(self, kind: str, text: str, tool: str | None) -> None:
        last = self._parts[-1] if self._parts else None
        if last is not None and last.kind == kind and last.tool == tool:
            self._parts[-1] = StreamedPart(kind=kind, text=last.text + text, tool=tool)
        else:
            self._parts.append(StreamedPart(kind=kind, text=text, tool=tool))
        self._chars += len(text)
        if self._chars > self._max_chars:
            self._trim()
        now = self._clock()
        if self._last is None or now - self._last >= self._interval:
            self._report()
        elif self._later is not None and not self._armed:
            self._armed = True
            self._later(self._last + self._interval - now, self._due)

    def _trim(self) -> None:
        """Keep the last ``max_chars`` characters; count what goes as skipped."""
        over = self._chars - self._max_chars
        while over > 0 and self._parts:
            first = self._parts[0]
            if len(first.text) <= over:
                self._parts.pop(0)
                cut = len(first.text)
            else:
                self._parts[0] = StreamedPart(
                    kind=first.kind, text=first.text[over:], tool=first.tool
                )
                cut = over
            over -= cut
            self._chars -= cut
            self._skipped += cut

    def _report(self, *, void: bool = False) -> None:
        self._seq += 1
        self._last = self._clock()
        parts, self._parts, self._chars = tuple(self._parts), [], 0
        skipped, self._skipped = self._skipped, 0
        if not void:
            self._shown = True
        self._send(
            Streamed(
                run_id=self._run_id,
                turn=self._turn,
                seq=self._seq,
                parts=() if void else parts,
                skipped=0 if void else skipped,
                void=void,
            )
        )
