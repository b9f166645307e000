"""subagents.actors."""

from subagents.logs import ensure_configured as _ensure_logging

_ensure_logging()  # quiet by default (see subagents/__init__.py)
