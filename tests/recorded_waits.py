"""RecordedWaits: a cancel signal that records the waits asked of it (for the model tests)."""

from __future__ import annotations


class RecordedWaits:
    """A cancel signal (``CancelSignal``) that records every wait asked of it and returns at
    once, never set: what a backend waits for (a delay, a backoff, a ``retry-after``) is then
    checked exactly, not by timing a sleep on a shared, loaded machine."""

    def __init__(self) -> None:
        self.waits: list[float | None] = []

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return False
