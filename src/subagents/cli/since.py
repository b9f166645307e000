"""A time a person gives on the command line (`--since`, `--until`), as a Unix time.

Why one parser: `log --since`, `events --since/--until` and `ps --watch` read the same
words, as `docker logs --since` and `journalctl --since` do:

- a duration ago: ``90s``, ``10m``, ``2h``, ``1d`` (a bare number is seconds), or several
  joined: ``1h30m``;
- an instant: an ISO 8601 date or date and time (``2026-11-26``, ``2026-11-26T17:05``,
  ``2026-11-26 17:05:30``, with or without a zone: without one it is the local time), or a
  Unix time with a fraction (``1764176700.5``).

A word that is neither is an error naming it and the forms above.
"""

from __future__ import annotations

import datetime as dt
import re

UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([smhd]))+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_EPOCH = re.compile(r"\d{9,}(?:\.\d+)?")
FORMS = "a duration ago (90s, 10m, 2h, 1d, 1h30m), an ISO date/time or a Unix time"


class SinceError(ValueError):
    """``text`` is not a time this module reads."""


def parse_time(text: str, now: float) -> float:
    """The Unix time ``text`` names, durations counted back from ``now``."""
    word = text.strip().lower()
    if not word:
        raise SinceError(f"empty time; give {FORMS}")
    if re.fullmatch(r"\d+(?:\.\d+)?", word) and not _EPOCH.fullmatch(word):
        return now - float(word)  # a bare small number: seconds ago
    if _DURATION.fullmatch(word):
        return now - sum(float(n) * UNIT_SECONDS[unit] for n, unit in _PART.findall(word))
    if _EPOCH.fullmatch(word):
        return float(word)
    try:
        instant = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise SinceError(f"{text!r} is not a time; give {FORMS}") from None
    try:  # a date at the edge of the calendar (0001-01-01) has no local time or Unix time
        if instant.tzinfo is None:
            instant = instant.astimezone()  # the local time, as a person here means it
        return instant.timestamp()
    except (ValueError, OverflowError, OSError) as exc:
        raise SinceError(f"{text!r} is out of range ({exc}); give {FORMS}") from None
