"""Skills: reusable instructions an agent can preload or load on demand.

Claude Code keeps skills as ``.claude/skills/<name>/SKILL.md`` folders; flat ``<name>.md``
files are accepted too. Only the metadata (name, description from the frontmatter) is read up
front -- an index of many skills must stay cheap -- and a body is read the first time it is
asked for, then cached. A skill is handed to a model wrapped as ``<skill name="...">``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from subagents.definitions import frontmatter
from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.parse import read_file_text
from subagents.definitions.spec import AgentSpec
from subagents.definitions.validate import strict_name_problem
from subagents.logs import get_logger

log = get_logger("subagents.skills")

SKILL_FILE = "SKILL.md"
HEAD_BYTES = 16 * 1024  # enough for any frontmatter; the rest of a skill is read on demand


class SkillInfo(msgspec.Struct, frozen=True):
    """What is known of a skill before its body is read."""

    name: str
    description: str
    path: str


def default_skill_dirs(*, cwd: Path | None = None, home: Path | None = None) -> list[Path]:
    """The nearest ``.claude/skills`` walking up from ``cwd``, then ``~/.claude/skills``.

    Only folders that exist are returned.
    """
    cwd = (cwd or Path.cwd()).absolute()
    home = home or Path.home()
    user_dir = home / ".claude" / "skills"
    found: list[Path] = []
    for folder in (cwd, *cwd.parents):
        candidate = folder / ".claude" / "skills"
        if candidate.is_dir():
            if candidate.resolve() != user_dir.resolve():
                found.append(candidate)
            break
    if user_dir.is_dir():
        found.append(user_dir)
    return found


class SkillIndex:
    """Skills found in ``dirs`` (earlier dirs win a name); ``issues`` lists what went wrong."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self._skills: dict[str, SkillInfo] = {}
        self._bodies: dict[str, str] = {}
        self.issues: list[LoadIssue] = []
        for folder in dirs:
            self._scan(Path(folder))

    def _scan(self, folder: Path) -> None:
        if not folder.is_dir():
            self.issues.append(
                LoadIssue(
                    reason="skills directory not found; no skills loaded from it", file=str(folder)
                )
            )
            return
        found_here: dict[str, str] = {}
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            self.issues.append(LoadIssue(reason=f"cannot list: {exc.strerror}", file=str(folder)))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            if entry.is_dir():
                path = path / SKILL_FILE
                if not path.is_file():
                    continue
                fallback = entry.name
            elif entry.name.lower().endswith(".md") and not entry.name.lower().startswith("readme"):
                fallback = entry.name[:-3]
            else:
                continue
            info = self._read_info(path, fallback)
            if info is None:
                continue
            if info.name in found_here:
                self.issues.append(
                    LoadIssue(
                        reason=f"duplicate skill {info.name!r}: defined in {found_here[info.name]}"
                        f" and in {info.path}; using {found_here[info.name]}",
                        file=info.path,
                        name=info.name,
                    )
                )
                continue
            found_here[info.name] = info.path
            if info.name in self._skills:
                log.info(
                    "skill shadowed",
                    skill=info.name,
                    winner=self._skills[info.name].path,
                    loser=info.path,
                )
                continue
            self._skills[info.name] = info

    def _read_info(self, path: Path, fallback: str) -> SkillInfo | None:
        try:
            try:
                header = frontmatter.parse(read_file_text(path, head=HEAD_BYTES))
            except DefinitionError:
                header = frontmatter.parse(read_file_text(path))  # a header longer than the head
        except DefinitionError as exc:
            self.issues.append(
                LoadIssue(reason=exc.reason, file=str(path), line=exc.line, severity="error")
            )
            return None
        name = header.data.get("name", fallback)
        description = header.data.get("description")
        # Skills keep the strict name rule: their names are listed in comma strings
        # (``skills: a, b``), asked for by models through load_skill and default to folder names.
        problem = strict_name_problem(name) if isinstance(name, str) else None
        if not isinstance(name, str) or problem:
            reason = problem or f"name {name!r} is not text"
            self.issues.append(
                LoadIssue(reason=f"skill {reason}", file=str(path), severity="error")
            )
            return None
        if not isinstance(description, str) or not description.strip():
            self.issues.append(
                LoadIssue(reason="skill has no 'description'", file=str(path), name=name)
            )
            description = ""
        return SkillInfo(name=name, description=description.strip(), path=str(path))

    def names(self) -> list[str]:
        """Every skill name, sorted."""
        return sorted(self._skills)

    def info(self, name: str) -> SkillInfo | None:
        return self._skills.get(name)

    def body(self, name: str) -> str:
        """The skill's instructions (the markdown body), read on first use.

        ``KeyError`` for an unknown name; ``DefinitionError`` if the file became unreadable.
        """
        if name in self._bodies:
            return self._bodies[name]
        info = self._skills[name]
        try:
            body = frontmatter.parse(read_file_text(Path(info.path))).body.strip()
        except DefinitionError as exc:
            raise exc.with_location(file=info.path) from None
        self._bodies[name] = body
        return body

    def render(self, name: str) -> str:
        """The skill as a model sees it: ``<skill name="...">`` body ``</skill>``."""
        return f'<skill name="{name}">\n{self.body(name)}\n</skill>'


def preload_skills(spec: AgentSpec, index: SkillIndex) -> tuple[str, list[LoadIssue]]:
    """``spec``'s system prompt with each of its ``skills`` appended, rendered.

    An unknown or unreadable skill is a warning and is left out; the prompt is still usable.
    """
    parts = [spec.prompt] if spec.prompt else []
    issues: list[LoadIssue] = []
    for skill in spec.skills:
        if index.info(skill) is None:
            known = ", ".join(index.names()) or "none"
            issues.append(
                LoadIssue(
                    reason=f"skills: unknown skill {skill!r} (known: {known})",
                    file=spec.source,
                    name=spec.name,
                )
            )
            continue
        try:
            parts.append(index.render(skill))
        except DefinitionError as exc:
            issues.append(
                LoadIssue(reason=f"skills: {skill!r}: {exc}", file=spec.source, name=spec.name)
            )
    return "\n\n".join(parts), issues
