"""subagents.behaviour."""
