"""Errors and issues met while reading agent definitions.

Two shapes on purpose: ``DefinitionError`` is raised by the single-definition parsers (a caller
asked for one thing and it is wrong), while ``LoadIssue`` is a value collected by the loaders,
which must keep going past a bad file so that one typo never hides every other definition.
Both always say where (file, line) and what was wrong.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Severity = Literal["warning", "error"]


def where(file: str | None, line: int | None) -> str:
    """``file:line`` as compilers print it, with whatever part is known."""
    if file is None:
        return "" if line is None else f"line {line}"
    return file if line is None else f"{file}:{line}"


class DefinitionError(Exception):
    """A definition that cannot be used; ``str()`` reads ``path/to/file.md:12: reason``."""

    def __init__(self, reason: str, *, file: str | None = None, line: int | None = None) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        prefix = where(self.file, self.line)
        return f"{prefix}: {self.reason}" if prefix else self.reason

    def __reduce__(self) -> tuple[object, ...]:
        # keyword-only arguments do not survive the default pickling of exceptions
        return (_rebuild_error, (self.reason, self.file, self.line))

    def with_location(self, *, file: str | None = None, line: int | None = None) -> DefinitionError:
        """The same error with the missing parts of its location filled in."""
        return DefinitionError(
            self.reason,
            file=self.file if self.file is not None else file,
            line=self.line if self.line is not None else line,
        )


def _rebuild_error(reason: str, file: str | None, line: int | None) -> DefinitionError:
    return DefinitionError(reason, file=file, line=line)


class LoadIssue(msgspec.Struct, frozen=True):
    """One warning or error met while loading; an ``error`` means the definition was dropped."""

    reason: str
    file: str | None = None
    line: int | None = None
    name: str | None = None
    severity: Severity = "warning"

    def __str__(self) -> str:
        prefix = where(self.file, self.line)
        subject = f"{self.name}: " if self.name else ""
        text = f"{self.severity}: {subject}{self.reason}"
        return f"{prefix}: {text}" if prefix else text

    def as_error(self) -> DefinitionError:
        """This issue as an exception, for callers that want to stop at the first problem."""
        return DefinitionError(self.reason, file=self.file, line=self.line)
