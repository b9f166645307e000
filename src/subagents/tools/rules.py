"""Permission rules in Claude Code's syntax: ``Tool`` or ``Tool(specifier)``.

- ``Bash(git diff:*)``: commands starting with ``git diff`` (a word boundary after it);
  ``Bash(npm test)``: exactly that command; ``Bash(git * main)``: ``*`` matches anything.
  An allow (or ask, or a definition's ``tools``) rule matches a line when the line is plain
  (no substitution, subshell...) and every command of it matches as written, its leading
  ``NAME=value`` assignments and its program's path included (``PATH=x git diff`` and
  ``./git diff`` are not ``git diff``); its redirections are not part of it. A deny rule
  matches a line when ANY command it runs matches, the program named however it is written
  (``/bin/rm``, ``command rm``, ``\\rm``, ``'rm'``, inside ``$(...)`` or ``sh -c``, and
  ``find -delete`` as ``rm``); a command whose program cannot be named (``$X``) or a line
  that cannot be read is denied by any Bash deny rule with a specifier.
- ``Read(./src/**)``, ``Edit(docs/**)``: gitignore-style path patterns (pathspec). ``//x``
  is the absolute path ``/x``; ``~/x`` is under the home directory; ``/x``, ``./x`` and
  ``x`` are relative to the workspace root. ``Read`` rules cover the tools that read files
  (Read, Grep, Glob, LS), ``Edit`` rules those that change them (Edit, MultiEdit, Write,
  NotebookEdit).
- ``mcp__server`` or ``mcp__server__*``: every tool of that MCP server.
- Any other name: that tool, whatever its input.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from subagents.tools.programs_run import commands_run
from subagents.tools.shellwords import Command, parse
from subagents.tools.web_fetch import domain_matches

if TYPE_CHECKING:
    import pathspec

READ_FAMILY = frozenset({"Read", "Grep", "Glob", "LS", "NotebookRead"})
EDIT_FAMILY = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
PATH_KEYS = ("file_path", "notebook_path", "path")
_RULE = re.compile(r"^\s*([A-Za-z0-9_.*-]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


class RuleError(ValueError):
    """A rule that cannot be understood; names the rule and what is wrong."""


def command_matches(rule: Rule, command: Command) -> bool:
    """One simple command, as written, against a Bash ``rule`` (allow-type matching): its
    program named plainly, its words joined by spaces against the specifier."""
    return rule._matches_simple_command(command)


@dataclass(frozen=True)
class Rule:
    """One parsed rule."""

    text: str
    tool: str
    specifier: str | None = None
    _paths: pathspec.PathSpec[Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, text: str) -> Rule:
        if not isinstance(text, str):
            raise RuleError(f"permission rule {text!r} is not text")
        match = _RULE.match(text)
        if match is None:
            raise RuleError(f"permission rule {text!r} is not of the form Tool or Tool(specifier)")
        tool, spec = match.group(1), match.group(2)
        if spec is not None:
            spec = spec.strip()
            if not spec or spec == "*":
                spec = None  # Tool() and Tool(*) mean the whole tool
        paths = None
        if spec is not None and tool in {"Read", "Edit"} | READ_FAMILY | EDIT_FAMILY:
            import pathspec  # here: only a rule with a path pattern needs it

            try:
                paths = pathspec.PathSpec.from_lines("gitignore", [_anchored(spec)])
            except Exception as exc:
                raise RuleError(f"permission rule {text!r}: bad path pattern: {exc}") from None
        return cls(text=text.strip(), tool=tool, specifier=spec, _paths=paths)

    def names(self, tool: str) -> bool:
        """Whether this rule is about ``tool`` at all (its input aside)."""
        if self.tool == tool:
            return True
        if self.tool == "Read" and tool in READ_FAMILY:
            return True
        if self.tool == "Edit" and tool in EDIT_FAMILY:
            return True
        if self.tool.startswith("mcp__"):  # mcp__server or mcp__server__*: the whole server
            server = self.tool.removesuffix("__*")
            if server.count("__") == 1:
                return tool.startswith(server + "__")
        return False

    def matches(
        self, tool: str, arguments: Mapping[str, Any], target: Path | None, root: Path
    ) -> bool:
        """Whether a call of ``tool`` with ``arguments`` falls under this rule. For Bash, a
        line matches when each of its commands does (``_matches_simple_command`` per command)."""
        if not self.names(tool):
            return False
        if self.specifier is None:
            return True
        if tool == "Bash":
            command = arguments.get("command")
            if not isinstance(command, str):
                return False
            script = parse(command)
            return script.plain and all(map(self._matches_simple_command, script.commands))
        if self._paths is not None:
            return target is not None and self.matches_path(target, root)
        if tool == "WebFetch":  # WebFetch(domain:example.com)
            return domain_matches(self.specifier, arguments.get("url"))
        return False

    def _matches_simple_command(self, command: Command) -> bool:
        """One simple command, as written, against a Bash specifier (allow-type matching)."""
        if not command.words or not command.words[0].literal:
            return False
        return self.matches_text(" ".join(w.text for w in command.words))

    def denial(self, line: str) -> str | None:
        """Why this Bash deny rule refuses ``line`` (any command it runs, however named),
        or None."""
        ran = commands_run(line)
        if ran is None:
            return f"the command line cannot be read, so the rule {self.text} cannot be checked"
        for command in ran:
            if not command.known:
                return (
                    f"the command line runs a program named by an expansion"
                    f" ({command.words[0]}), so the rule {self.text} cannot be checked"
                )
            if self.matches_text(command.text):
                return f"Bash is denied by the rule {self.text} ({command.text!r})"
        return None

    def matches_text(self, text: str) -> bool:
        """A command's words joined by spaces against a Bash specifier."""
        spec = self.specifier
        if spec is None:
            return True
        text = " ".join(text.split())
        if spec.endswith(":*"):
            prefix = " ".join(spec[:-2].split())
            return text == prefix or text.startswith(prefix + " ")
        if "*" in spec:
            return fnmatch.fnmatchcase(text, " ".join(spec.split()))
        return text == " ".join(spec.split())

    def matches_path(self, target: Path, root: Path) -> bool:
        assert self._paths is not None and self.specifier is not None
        spec = self.specifier
        if spec.startswith("//") or spec.startswith("~/"):
            relative = target.as_posix().lstrip("/")
        else:
            if not (target == root or target.is_relative_to(root)):
                return False
            relative = target.relative_to(root).as_posix() if target != root else "."
        if self._paths.match_file(relative):
            return True
        # a directory a search looks in: under the rule when what is inside it is
        # (best effort, as in Claude Code: a search of a parent still reads the subtree)
        return _may_be_directory(target) and self._paths.match_file(relative + "/-")


def _may_be_directory(target: Path) -> bool:
    """A directory, or a path that does not exist and has no suffix (as a folder name)."""
    return target.is_dir() or not target.suffix


def _anchored(spec: str) -> str:
    """A rule's path as a gitignore pattern anchored where Claude Code anchors it."""
    if spec.startswith("//"):
        return "/" + spec[2:].lstrip("/")
    if spec.startswith("~/"):
        return "/" + (Path.home() / spec[2:]).as_posix().lstrip("/")
    if spec.startswith("./"):
        return "/" + spec[2:]
    if spec.startswith("/"):
        return spec
    return "/" + spec


def parse_rules(texts: tuple[str, ...] | list[str], where: str) -> tuple[Rule, ...]:
    """Rules from ``texts``; RuleError naming ``where`` they came from on a bad one."""
    rules: list[Rule] = []
    for text in texts:
        try:
            rules.append(Rule.parse(text))
        except RuleError as exc:
            raise RuleError(f"{where}: {exc}") from None
    return tuple(rules)


def call_target(tool: str, arguments: Mapping[str, Any], root: Path) -> Path | None:
    """The path a file tool's call is about, resolved (symlinks and ``..``); the workspace
    root for a search without a path; None for other tools or an unusable path."""
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip() and "\x00" not in value:
            given = Path(value)
            return Path(os.path.realpath(given if given.is_absolute() else root / given))
    if tool in READ_FAMILY:
        return root
    return None
