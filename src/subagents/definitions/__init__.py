"""Agent definitions: the vocabulary every layer above shares (pure: no threads, no pykka).

``AgentSpec`` is one definition. The parsers read Claude Code compatible markdown (tolerantly:
real files are messy), mappings and JSON; ``validate`` judges a spec; ``resolve_extends``
applies inheritance; ``DefinitionLoader`` discovers files across the standard levels with a
per-file cache for cheap reloads; ``SkillIndex`` serves skills. See docs/definitions.md.
"""

from subagents.definitions.discovery import (
    Changes,
    DefinitionLoader,
    LoadResult,
    Shadowed,
    Source,
    default_sources,
)
from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.extends import resolve_extends
from subagents.definitions.parse import load_file, parse_json, parse_mapping, parse_markdown
from subagents.definitions.skills import SkillIndex, SkillInfo, default_skill_dirs, preload_skills
from subagents.definitions.spec import AgentSpec, Level
from subagents.definitions.validate import KNOWN_TOOLS, validate

__all__ = [
    "KNOWN_TOOLS",
    "AgentSpec",
    "Changes",
    "DefinitionError",
    "DefinitionLoader",
    "Level",
    "LoadIssue",
    "LoadResult",
    "Shadowed",
    "SkillIndex",
    "SkillInfo",
    "Source",
    "default_skill_dirs",
    "default_sources",
    "load_file",
    "parse_json",
    "parse_mapping",
    "parse_markdown",
    "preload_skills",
    "resolve_extends",
    "validate",
]
