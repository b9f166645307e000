"""Frontmatter: split a markdown definition into its YAML header and its body, tolerantly.

Agent files are hand written and copied around, and Claude Code reads many files that strict
YAML rejects. So the header is read in two passes:

1. the whole header with the bounded YAML loader (``yamlsafe``) -- the normal case;
2. if that fails as *invalid* YAML (never when it was *refused* as a bomb), a line-based reader:
   the header is cut into top-level ``key: value`` chunks (a key line plus its indented or
   ``- item`` continuation lines); each chunk is tried as YAML on its own, and a chunk that still
   fails is read as text -- the value is everything after the first ``": "`` (an unquoted colon
   inside a one-line description is the usual culprit), continuation lines folded with spaces,
   block scalars (``|``, ``>``) dedented, ``- item`` lines made a list.

The delimiters are tolerated too: leading blank lines, a header indented as a whole, and a
closing line of more than three dashes. Each tolerance leaves a note (line, reason) that the
loader turns into a warning, so the author learns what to fix while the agent still loads.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from subagents.definitions.errors import DefinitionError
from subagents.definitions.yamlsafe import YamlProblem, load_yaml

_KEY_LINE = re.compile(r"^([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
_TOP_KEY = re.compile(r"""^["']?([A-Za-z_][\w.-]*)["']?[ \t]*:(?:\s|$)""")
_BLOCK_HEADER = re.compile(r"^([|>])([+-]?)[1-9]?[+-]?[ \t]*(?:#.*)?$")
_CLOSING = re.compile(r"^(?:-{3,}|\.\.\.)$")


class Note(msgspec.Struct, frozen=True):
    """Something read leniently: the author should fix it, the definition still loads."""

    line: int | None
    reason: str


class Frontmatter(msgspec.Struct, frozen=True):
    """The parsed header (``data``), the body, and where things are in the file (1-based)."""

    data: dict[str, Any]
    body: str
    body_line: int
    header_line: int
    key_lines: dict[str, int]
    notes: tuple[Note, ...] = ()
    lenient: bool = False


def normalise_text(text: str) -> str:
    """Drop a byte-order mark and turn CRLF/CR line ends into LF."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def split(text: str) -> tuple[list[str], int, str, int, list[Note]]:
    """Cut ``text`` into header lines, the header's first file line, body, body line, notes.

    Raises ``DefinitionError`` when there is no header or it never closes.
    """
    text = normalise_text(text)
    size = len(text)
    notes: list[Note] = []
    # Lines are cut one at a time up to the closing line: the body (most of a file) is
    # sliced off whole, never split into lines and joined again.
    pos = number = 0  # where the current line starts; its 0-based line number
    while True:
        end = text.find("\n", pos)
        end = size if end < 0 else end
        line = text[pos:end]
        if line.strip():
            break
        if end >= size:
            raise DefinitionError("file is empty", line=1)
        pos, number = end + 1, number + 1
    start = number
    if line.strip() != "---":
        raise DefinitionError(
            "no frontmatter: a definition starts with a '---' line, then 'name:' and "
            f"'description:', then '---'; found {_preview(line)}",
            line=start + 1,
        )
    indent = _indent(line)
    if start:
        notes.append(Note(start + 1, f"frontmatter starts after {start} blank line(s)"))
    if indent:
        notes.append(Note(start + 1, f"frontmatter is indented by {indent} character(s)"))
    lines: list[str] = []
    while True:
        if end >= size:
            raise DefinitionError(
                "frontmatter is never closed: no '---' line after it", line=start + 1
            )
        pos, number = end + 1, number + 1
        end = text.find("\n", pos)
        end = size if end < 0 else end
        line = text[pos:end]
        stripped = line.strip()
        if _CLOSING.match(stripped) and _indent(line) <= indent:
            break
        lines.append(line)
    if stripped not in ("---", "..."):
        notes.append(
            Note(number + 1, f"frontmatter closed by {len(stripped)} dashes instead of '---'")
        )
    header = [_dedent(header_line, indent) for header_line in lines]
    body = text[end + 1 :] if end < size else ""
    return header, start + 2, body, number + 2, notes


def _dedent(line: str, indent: int) -> str:
    if not indent:
        return line
    cut = min(indent, _indent(line))
    return line[cut:]


def _preview(line: str, width: int = 40) -> str:
    text = line.strip()
    return repr(text if len(text) <= width else text[:width] + "...")


def parse(text: str) -> Frontmatter:
    """Parse a markdown definition's header and body; raises ``DefinitionError``."""
    header, first, body, body_line, notes = split(text)
    key_lines = _key_lines(header, first)
    header_text = "\n".join(header) + "\n"
    try:
        data = load_yaml(header_text)
    except YamlProblem as problem:
        line = None if problem.line is None else problem.line + first - 1
        if problem.refused:
            raise DefinitionError(problem.reason, line=line) from None
        data, lenient_notes = _lenient(header, first)
        where = f" at line {line}" if line is not None else ""
        notes.insert(
            0,
            Note(
                line, f"frontmatter is not strict YAML{where} ({problem.reason}); read it leniently"
            ),
        )
        notes.extend(lenient_notes)
        return Frontmatter(
            _string_keys(data), body, body_line, first, key_lines, tuple(notes), True
        )
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise DefinitionError(
            f"frontmatter must be a mapping of 'key: value' lines, not a {type(data).__name__}",
            line=first,
        )
    return Frontmatter(_string_keys(data), body, body_line, first, key_lines, tuple(notes), False)


def _string_keys(data: dict[Any, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in data.items()}


def _key_lines(header: list[str], first: int) -> dict[str, int]:
    found: dict[str, int] = {}
    for offset, line in enumerate(header):
        match = _TOP_KEY.match(line)
        if match:
            found.setdefault(match.group(1), first + offset)
    return found


def _chunks(header: list[str], first: int) -> tuple[list[tuple[int, list[str]]], list[Note]]:
    """Top-level chunks: (file line of the key, [key line, continuation lines...])."""
    chunks: list[tuple[int, list[str]]] = []
    notes: list[Note] = []
    for offset, line in enumerate(header):
        if not line.strip() or (line.lstrip().startswith("#") and not line[:1].isspace()):
            if chunks:
                chunks[-1][1].append(line)
            continue
        continues = line[:1] in (" ", "\t") or line.startswith("- ") or line == "-"
        if continues and chunks:
            chunks[-1][1].append(line)
        elif _KEY_LINE.match(line):
            chunks.append((first + offset, [line]))
        else:
            notes.append(Note(first + offset, f"line ignored, not 'key: value': {_preview(line)}"))
    return chunks, notes


def _lenient(header: list[str], first: int) -> tuple[dict[str, Any], list[Note]]:
    data: dict[str, Any] = {}
    chunks, notes = _chunks(header, first)
    for line_no, chunk in chunks:
        match = _KEY_LINE.match(chunk[0])
        assert match is not None  # _chunks only starts a chunk on a key line
        key = match.group(1)
        try:
            parsed = load_yaml("\n".join(chunk) + "\n")
        except YamlProblem as problem:
            if problem.refused:
                raise DefinitionError(problem.reason, line=line_no) from None
            parsed = None
        if isinstance(parsed, dict) and list(parsed) == [key]:
            data[key] = parsed[key]
            continue
        data[key] = _as_text(match.group(2) or "", chunk[1:])
        notes.append(Note(line_no, f"'{key}' read as plain text"))
    return data, notes


def _as_text(first_value: str, rest: list[str]) -> Any:
    """A chunk YAML rejected, read the way its author meant it."""
    header = _BLOCK_HEADER.match(first_value)
    body = list(rest)
    while body and not body[-1].strip():
        body.pop()
    if header:
        return _block_scalar(header.group(1), header.group(2), body)
    items = [line.strip() for line in body if line.strip()]
    if not first_value and items and all(item.startswith("-") for item in items):
        return [_unquote(item[1:].strip()) for item in items]
    words = [first_value.strip(), *items]
    return _unquote(" ".join(word for word in words if word))


def _block_scalar(style: str, chomp: str, lines: list[str]) -> str:
    indents = [_indent(line) for line in lines if line.strip()]
    cut = min(indents) if indents else 0
    text_lines = [line[cut:] if line.strip() else "" for line in lines]
    if style == "|":
        text = "\n".join(text_lines)
    else:
        paragraphs: list[str] = []
        current: list[str] = []
        for line in text_lines:
            if line:
                current.append(line.strip())
            else:
                paragraphs.append(" ".join(current))
                current = []
        paragraphs.append(" ".join(current))
        text = "\n".join(paragraphs)
    if chomp == "-":
        return text.rstrip("\n")
    return text.rstrip("\n") + "\n"


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value
