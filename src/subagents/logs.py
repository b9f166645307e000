"""Logging setup: structlog for every line, quiet by default when embedded.

A library must not flood its host's stdout, so when nobody has configured structlog the
runtime installs a configuration that writes to stderr at WARNING (or ``SUBAGENTS_LOG_LEVEL``),
readable on a terminal, JSON lines with ``SUBAGENTS_LOG_JSON=1``. A host that configures
structlog itself keeps its own configuration. The command line calls ``configure`` explicitly.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

import structlog

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


def level_from(value: str | None, default: int = logging.WARNING) -> int:
    """A level name (any case) or number; ``ValueError`` naming the value otherwise."""
    if value is None or value == "":
        return default
    if value.isdigit():
        return int(value)
    try:
        return _LEVELS[value.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {value!r}; use one of {', '.join(_LEVELS)}") from None


def configure(
    *, level: str | int | None = None, json: bool | None = None, stream: TextIO | None = None
) -> None:
    """Configure structlog for this process (stderr; level and format from args or env)."""
    if level is None or isinstance(level, str):
        lvl = level_from(level if level is not None else os.environ.get("SUBAGENTS_LOG_LEVEL"))
    else:
        lvl = level
    if json is None:
        json = os.environ.get("SUBAGENTS_LOG_JSON", "") not in ("", "0", "false", "no")
    out = stream or sys.stderr
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        colors = out.isatty() and "NO_COLOR" not in os.environ
        processors.append(structlog.dev.ConsoleRenderer(colors=colors))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        # one write per line (a print is two: the text, then the newline), so a line of the
        # command's own on stderr never lands between a log line and its newline
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def ensure_configured() -> None:
    """Install the quiet default unless the host (or the command) configured structlog."""
    if not structlog.is_configured():
        try:
            configure()
        except ValueError as exc:
            # A bad SUBAGENTS_LOG_LEVEL must not break ``import subagents`` in a host program:
            # keep the default level and say why (the command line refuses it instead).
            configure(level=logging.WARNING)
            structlog.get_logger("subagents").warning("SUBAGENTS_LOG_LEVEL ignored", error=str(exc))


_DEBUG_ON: dict[type, bool] = {}


def debug_enabled() -> bool:
    """Whether a ``log.debug`` line would be written under structlog's current configuration.

    Why: a debug call through a module-level ``structlog.get_logger()`` proxy builds a bound
    logger (and its output logger) on every call, even when the level filters the line out;
    on hot paths (an event per run transition, a scripted model turn) that is a large share of
    a trivial run's CPU (benchmarks/README.md). Hot paths ask this first. The answer is
    remembered per wrapper class, which structlog replaces whenever it is reconfigured; a
    wrapper that cannot tell its level (e.g. one over stdlib logging, whose level can change
    at any time) counts as enabled.
    """
    wrapper = structlog.get_config()["wrapper_class"]
    known = _DEBUG_ON.get(wrapper)
    if known is None:
        check = getattr(structlog.get_logger().bind(), "is_enabled_for", None)
        known = True if check is None else bool(check(logging.DEBUG))
        if check is not None:
            _DEBUG_ON[wrapper] = known
    return known
