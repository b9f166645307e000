"""subagents: an actor-model runtime for LLM subagents with mailboxes."""

from subagents.logs import ensure_configured as _ensure_logging

__version__ = "0.1.0"

# Quiet by default: an embedding program that configured structlog keeps its configuration;
# otherwise log lines go to stderr at WARNING (SUBAGENTS_LOG_LEVEL / SUBAGENTS_LOG_JSON).
_ensure_logging()
