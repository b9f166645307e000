"""subagents.definitions."""
