"""subagents: an actor-model runtime for LLM subagents with mailboxes."""

__version__ = "0.1.0"
