"""Claude Code's permission modes, ordered from the strictest to the most permissive.

A definition's ``permissionMode`` can only tighten the runtime's: the mode a run gets is the
stricter of the two, so a file from a public collection cannot grant itself
``bypassPermissions``.
"""

from __future__ import annotations

from typing import Literal

from subagents.definitions.validate import PERMISSION_MODES

Mode = Literal["plan", "dontAsk", "default", "acceptEdits", "bypassPermissions"]
MODES: tuple[Mode, ...] = ("plan", "dontAsk", "default", "acceptEdits", "bypassPermissions")
assert set(MODES) == set(PERMISSION_MODES), "the definitions checker knows the same modes"
"""Strictest first: plan (read-only) < dontAsk (never asks: denies) < default (asks) <
acceptEdits (file edits allowed) < bypassPermissions (nothing asked)."""


def parse_mode(value: object, where: str) -> Mode:
    """A mode by its Claude Code name; ValueError naming ``where`` and the valid names."""
    if isinstance(value, str) and value in MODES:
        return value  # narrowed by the membership test
    raise ValueError(f"{where}: permission mode {value!r} is not one of {', '.join(MODES)}")


def stricter(a: Mode, b: Mode) -> Mode:
    return a if MODES.index(a) <= MODES.index(b) else b
