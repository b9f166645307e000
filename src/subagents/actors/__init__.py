"""subagents.actors."""
