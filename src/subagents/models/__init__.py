"""subagents.models."""
