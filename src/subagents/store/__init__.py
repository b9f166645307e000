"""subagents.store."""
