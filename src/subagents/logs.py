"""Logging setup: structlog for every line, quiet by default when embedded.

A library must not flood its host's stdout, so when nobody has configured structlog the
runtime installs a configuration that writes to stderr at WARNING (or ``SUBAGENTS_LOG_LEVEL``),
readable on a terminal, JSON lines with ``SUBAGENTS_LOG_JSON=1``. A host that configures
structlog itself keeps its own configuration. The command line gives its settings with
``configure_on_first_use``.

structlog itself is imported at the first line logged that its level lets through (or a
configuration, or a Runtime starting), not with this module: it imports rich's tracebacks,
its pretty-printer and asyncio, which most commands and many embedding programs never need.

``printable`` is here too: a log line for a person and every view of the command line
(``cli/output.py``, above this layer) must escape exactly the same characters, and a second
copy of the list drifted once (the Arabic letter mark was added to one only).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from types import ModuleType
from typing import Any, TextIO

UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
"""What text from a task, a model, mail or a file must not send to a terminal: C0 controls
but tab and newline (ESC starts colour, cursor and title sequences; BEL rings; CR overwrites
a line), DEL, the C1 controls (``\x9b`` is an 8-bit CSI), the bidirectional marks and
overrides that make text read backwards (the Arabic letter mark U+061C among them), and the
line and paragraph separators U+2028/U+2029 (a line break to some terminals and editors)."""


def printable(text: str) -> str:
    """``text`` safe for a human view: every control character shown as an escape
    (``\x1b[31m`` appears as the nine characters ``\\x1b[31m``), tabs and newlines kept.

    Every human view passes task, result, mail, transcript and definition text through this;
    ``--json`` escapes the same characters as JSON escapes instead (``cli/output.json_text``:
    the document decodes to the exact text)."""
    if not UNPRINTABLE.search(text):
        return text
    return UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _structlog() -> ModuleType:
    """structlog, imported at the first line logged or configuration, not with the package:
    importing it imports rich's tracebacks and pretty-printer and asyncio (about a fifth of
    ``import subagents.runtime`` when it was imported here), and a process that logs nothing
    (``subagents ps``, an embedding host at WARNING) should not pay for them."""
    import structlog

    return structlog


class _StderrLines:
    """Standard error as it is *at each write*, one whole line at a time under one lock.

    Why: a live view (rich ``Live``) replaces ``sys.stderr`` while it draws, so that what is
    written there goes through its console *above* the view instead of into it; a logger
    holding the stream it was configured with would tear the view. And log lines from
    several threads, and the command's own notes, must never be interleaved mid-line (a
    JSON log line with a note glued to it cannot be read back)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partial = threading.local()

    def write(self, text: str) -> int:
        pending = getattr(self._partial, "text", "") + text
        if "\n" not in pending:
            self._partial.text = pending
            return len(text)
        lines, _, rest = pending.rpartition("\n")
        self._partial.text = rest
        with self._lock:
            stream = sys.stderr
            stream.write(lines + "\n")
            stream.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            sys.stderr.flush()

    def isatty(self) -> bool:
        isatty = getattr(sys.stderr, "isatty", None)
        return bool(isatty and isatty())


STDERR = _StderrLines()
"""Where log lines (and the command's notes, ``note``) go unless told otherwise."""


def note(text: str) -> None:
    """One line (or several) on standard error, never torn by a log line from another
    thread, and above a live view while one is drawn."""
    STDERR.write(text if text.endswith("\n") else text + "\n")


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
        return _standard(int(value), value)
    try:
        return _LEVELS[value.lower()]
    except KeyError:
        raise ValueError(f"unknown log level {value!r}; use one of {', '.join(_LEVELS)}") from None


def _standard(level: int, given: object) -> int:
    """``level`` when it is one of logging's standard levels (0, 10, ..., 50), the only ones
    structlog's filtering loggers are made for (another number, e.g. 15, passed here and
    broke the first line logged, with ``KeyError: 15``); ``ValueError`` naming it otherwise."""
    if level in _NUMBERS:
        return level
    raise ValueError(
        f"unknown log level {given!r}; use one of {', '.join(_LEVELS)}"
        f" or their numbers {', '.join(map(str, sorted(_NUMBERS)))}"
    )


_NUMBERS = frozenset({logging.NOTSET, *_LEVELS.values()})


def _settings(level: str | int | None, json: bool | None) -> tuple[int, bool]:
    """(level, json) from the arguments, then the environment; ``ValueError`` for a bad level."""
    if level is None or isinstance(level, str):
        lvl = level_from(level if level is not None else os.environ.get("SUBAGENTS_LOG_LEVEL"))
    else:
        lvl = _standard(level, level)
    if json is None:
        json = os.environ.get("SUBAGENTS_LOG_JSON", "") not in ("", "0", "false", "no")
    return lvl, json


_pending: tuple[int, bool, TextIO | None] | None = None
"""Settings given to ``configure_on_first_use``, not yet applied."""


def configure_on_first_use(
    *, level: str | int | None = None, json: bool | None = None, stream: TextIO | None = None
) -> None:
    """``configure``'s settings, checked now (``ValueError`` for a bad level) and applied at the
    first line logged (or when a Runtime starts), in place of the quiet default.

    Why: the command line must refuse a bad ``--log-level`` at once, but most commands
    (``ps``, ``log``, ``info``) log nothing, and importing structlog imports rich's
    tracebacks, its pretty-printer and asyncio. Where structlog is already imported there is
    nothing to save: the settings apply at once, exactly as ``configure`` would."""
    global _pending
    lvl, as_json = _settings(level, json)
    if "structlog" in sys.modules:
        configure(level=lvl, json=as_json, stream=stream)
        return
    _pending = (lvl, as_json, stream)


def configure(
    *, level: str | int | None = None, json: bool | None = None, stream: TextIO | None = None
) -> None:
    """Configure structlog for this process (stderr; level and format from args or env)."""
    global _pending
    _pending = None
    lvl, json = _settings(level, json)
    out: Any = stream or STDERR
    structlog = _structlog()
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if json:
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        colors = out.isatty() and "NO_COLOR" not in os.environ
        # a traceback without the frames' local variables: they hold tasks, prompts, mail
        # and results, which have no place in a log (structlog's default shows them)
        tracebacks = structlog.dev.RichTracebackFormatter(
            color_system="truecolor" if colors else None, show_locals=False
        )
        processors += [
            _printable_values,
            structlog.dev.ConsoleRenderer(colors=colors, exception_formatter=tracebacks),
        ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        # one write per line (a print is two: the text, then the newline), so a line of the
        # command's own on stderr never lands between a log line and its newline
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )


def _printable_values(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    """Every text of a line meant for a person made ``printable``: the console renderer
    writes a string value as it is, and a log line names what agents, models and the store
    said (a run's task, a tool's error, a host's name), so an escape sequence in one reached
    the terminal raw. Other values are shown by their ``repr``, which escapes them already;
    JSON lines escape control characters themselves and stay exact."""
    for key, value in event_dict.items():
        if type(value) is str and UNPRINTABLE.search(value):
            event_dict[key] = printable(value)
    return event_dict


_METHOD_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


def _first_level() -> int:
    """The level the first line logged will install (``ensure_configured``)."""
    if _pending is not None:
        return _pending[0]
    try:
        return level_from(os.environ.get("SUBAGENTS_LOG_LEVEL"))
    except ValueError:
        return logging.WARNING


def _dropped(*args: Any, **kwargs: Any) -> None:
    """A line below the level: not written, and structlog not imported for it."""


class _Logger:
    """A module's logger: structlog's, with the quiet default installed at its first use
    (``ensure_configured``), not when the module is imported."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if "structlog" not in sys.modules:  # nobody configured structlog, nothing logged yet
            level = _METHOD_LEVELS.get(attr)
            if level is not None and level < _first_level():
                return _dropped  # filtered out by the configuration its first line would install
        structlog = _structlog()
        if not structlog.is_configured():
            ensure_configured()
        return getattr(structlog.get_logger(self._name), attr)


def get_logger(name: str) -> Any:
    """The logger every module of the package uses (``log = get_logger(__name__)``).

    Why not ``structlog.get_logger``: importing the package must configure no logging (an
    application may configure structlog after importing it), yet a line the package logs
    before anyone configured structlog must not reach stdout at every level (structlog's
    own default). So the first line logged installs the quiet default, unless the
    application (or the command line, or a Runtime) configured structlog first."""
    return _Logger(name)


def ensure_configured() -> None:
    """Install the quiet default unless the host (or the command) configured structlog."""
    structlog = _structlog()
    if not structlog.is_configured():
        if _pending is not None:  # the command line's settings (``configure_on_first_use``)
            level, json, stream = _pending
            configure(level=level, json=json, stream=stream)
            return
        try:
            configure()
        except ValueError as exc:
            # A bad SUBAGENTS_LOG_LEVEL must not break ``import subagents`` in a host program:
            # keep the default level and say why (the command line refuses it instead).
            configure(level=logging.WARNING)
            structlog.get_logger("subagents").warning("SUBAGENTS_LOG_LEVEL ignored", error=str(exc))


_ENABLED: dict[tuple[type, int], bool] = {}


_CONFIG_OBJECT: list[Any] = []


def _structlog_config(structlog: ModuleType) -> Any:
    """structlog's one configuration object (``structlog._config._CONFIG``, which
    ``configure`` and ``reset_defaults`` change in place), or None where a version keeps
    none. Why: ``get_config()`` builds a dict of five entries per call, ~0.6 us, most of
    what ``debug_enabled`` cost on the hot paths (an event published per run transition:
    100,000 runs closed publish 100,000)."""
    if not _CONFIG_OBJECT:
        config = getattr(getattr(structlog, "_config", None), "_CONFIG", None)
        _CONFIG_OBJECT.append(config if hasattr(config, "default_wrapper_class") else None)
    return _CONFIG_OBJECT[0]


def enabled(level: int = logging.DEBUG) -> bool:
    """Whether a line at ``level`` (a ``log.debug`` line by default) would be written under
    structlog's current configuration.

    Why: a debug call through a module-level ``structlog.get_logger()`` proxy builds a bound
    logger (and its output logger) on every call, even when the level filters the line out;
    on hot paths (an event per run transition, a scripted model turn) that is a large share of
    a trivial run's CPU (benchmarks/README.md). Hot paths ask this first. The answer is
    remembered per wrapper class only for structlog's own filtering loggers
    (``make_filtering_bound_logger``: one class per level, the level fixed with it, a new
    class whenever the level is reconfigured). Any other wrapper counts as enabled and its
    own logger decides: one over stdlib logging answers ``is_enabled_for`` (structlog 26.1)
    from the logging module's levels, which the host may change at any time and set per
    logger name (``subagents.supervisor`` at info, the root at warning), so an answer kept,
    or asked of another logger's name, would drop lines that are on.
    """
    structlog = sys.modules.get("structlog")
    if structlog is None:  # nothing logged or configured yet: the first line brings the default
        return _first_level() <= level
    config = _CONFIG_OBJECT[0] if _CONFIG_OBJECT else _structlog_config(structlog)
    wrapper = (
        config.default_wrapper_class
        if config is not None
        else structlog.get_config()["wrapper_class"]
    )
    known = _ENABLED.get((wrapper, level))
    if known is None:
        if wrapper not in _fixed_level_wrappers(structlog):
            return True
        check = getattr(structlog.get_logger().bind(), "is_enabled_for", None)
        if check is None:
            return True
        known = _ENABLED[wrapper, level] = bool(check(level))
    return known


_FIXED: list[frozenset[type]] = []


def _fixed_level_wrappers(structlog: ModuleType) -> frozenset[type]:
    """structlog's filtering wrapper classes, whose level is fixed with the class (one per
    level, ``make_filtering_bound_logger``; its ``is_enabled_for`` reads no instance)."""
    if not _FIXED:
        _FIXED.append(
            frozenset(structlog.make_filtering_bound_logger(lvl) for lvl in range(0, 60, 10))
        )
    return _FIXED[0]


debug_enabled = enabled
"""``enabled(logging.DEBUG)``, the hot paths' question (the same function: no call more)."""
