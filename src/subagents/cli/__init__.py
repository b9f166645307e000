"""subagents.cli."""
