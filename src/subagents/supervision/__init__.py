"""subagents.supervision."""
