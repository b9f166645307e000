"""The shape of a YAML text -- how deep its collections nest, how many nodes it holds -- read
from the raw text, before and independently of any YAML parser.

Why not leave it to the parser: PyYAML's parsers differ. libyaml 0.2.6 (bundled with PyYAML
6.0.4) stops at 1,000 nesting levels with an error of its own, which its scanner's lookahead
meets before our composer has seen level 21; libyaml 0.2.5 (PyYAML 6.0.1 to 6.0.3) has no
such limit, and the pure-Python parser none either. Checked here first, the same document gets
the same verdict and the same message on every supported PyYAML, and none of them is handed a
document nested 200,000 deep at all.

The scan is a small YAML tokenizer that knows only what decides structure: flow brackets,
quoted scalars (which may span lines and hold brackets), comments, block scalars (``|``,
``>``, whose lines are text), plain scalars (text, also across continuation lines) and the
block indentation that opens a mapping or a sequence. It counts *at most* what a parser
builds: a level or a node is counted only where it is certain (a flow collection at its
bracket, a block collection where its first key or ``-`` opens a new indentation, a scalar
where it starts), and anything unusual is skipped rather than guessed. So a document it
refuses really is too deep or too big for the composer too; the composer's own checks
(``yamlsafe``) still apply to what it lets through.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from typing import NamedTuple

MAX_DEPTH = 20
MAX_NODES = 20_000


class ShapeRefused(Exception):
    """Nested deeper than ``MAX_DEPTH`` or more than ``MAX_NODES`` nodes; ``line`` 1-based."""

    def __init__(self, reason: str, line: int) -> None:
        self.reason = reason
        self.line = line
        super().__init__(f"line {line}: {reason}")


def too_deep() -> str:
    return f"nesting deeper than {MAX_DEPTH} levels"


def too_big() -> str:
    return f"more than {MAX_NODES} YAML nodes"


_SPACES = re.compile(r"[ \t]*")
# where a block-context plain scalar that may be a key ends: its ':' or a comment
_KEY_OR_COMMENT = re.compile(r":(?=[ \t]|$)|[ \t]#")
_COMMENT = re.compile(r"[ \t]#")
# where a flow-context plain scalar ends (it may go on past a line break: see ``flow``)
_FLOW_PLAIN_END = re.compile(r"[,\[\]{}\n]|:(?=[\s,\[\]{}]|$)|[ \t]#")
_PROPERTY = re.compile(r"[^\s,\[\]{}]*")  # a tag, an anchor or an alias
_DOUBLE = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SINGLE = re.compile(r"'(?:[^']|'')*'")
_BLANK = ("", " ", "\t")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _skip_spaces(line: str, pos: int) -> int:
    return _SPACES.match(line, pos).end()  # type: ignore[union-attr]  # always matches


class Shape(NamedTuple):
    """What the scan counted: at most the composer's deepest level and its node count
    (collections only for the depth: the scalars inside the deepest add one more)."""

    depth: int
    nodes: int


class _Scan:
    """One pass over ``text`` (line breaks normalised to ``\\n``), stopping at the limits."""

    def __init__(self, text: str, max_depth: float, max_nodes: float) -> None:
        self.max_depth, self.max_nodes = max_depth, max_nodes
        self.deepest = 0
        self.text = text
        self.lines = text.split("\n")
        self.starts = [0]  # each line's offset in ``text``
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line) + 1)
        self.row = 0  # the current line's index
        self.indents: list[int] = []  # the open block collections' columns (PyYAML's indents)
        self.nodes = 0

    # ---- counting ---------------------------------------------------------------------

    def node(self) -> None:
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise ShapeRefused(too_big(), self.row + 1)

    def level(self, depth: int) -> None:
        self.node()
        self.deepest = max(self.deepest, depth)
        if depth > self.max_depth:
            raise ShapeRefused(too_deep(), self.row + 1)

    def open_block(self, column: int) -> None:
        """A key or a ``-`` at ``column``: a new block collection if it is indented further
        than the innermost one open (else an entry of that one, or of an indentless sequence,
        which is not counted)."""
        if not self.indents or column > self.indents[-1]:
            self.indents.append(column)
            self.level(len(self.indents))

    # ---- the block context, line by line ----------------------------------------------

    def run(self) -> None:
        plain_open = False  # the last line ended inside a plain scalar (it may go on)
        while self.row < len(self.lines):
            line = self.lines[self.row]
            start = _indent(line)
            if start == len(line) or line[start] == "#":
                self.row += 1
                continue
            top = self.indents[-1] if self.indents else -1
            if plain_open and start > top:
                self.row += 1  # a continuation line of a plain scalar: text
                continue
            while self.indents and self.indents[-1] > start:
                self.indents.pop()
            plain_open = self.line(line, start, key_allowed=True)
            self.row += 1

    def line(self, line: str, pos: int, *, key_allowed: bool) -> bool:
        """Read the current line of the block context from ``pos``, where a node may start
        (a key too, when ``key_allowed``: at the line's start or after ``- `` or ``? ``).
        Returns whether it ends inside a plain scalar. Flow collections and quoted and block
        scalars may move the scan on to a later line."""
        if pos == 0 and line.startswith(("---", "...")) and line[3:4] in _BLANK:
            if line[0] == ".":
                return False  # a document end marker
            pos = _skip_spaces(line, 3)  # a document start marker, maybe a node after it
        while pos < len(line):
            char = line[pos]
            indicator = line[pos + 1 : pos + 2] in _BLANK
            if char in "-?" and indicator and key_allowed:
                self.open_block(pos)  # a sequence entry, or a complex key
                pos = _skip_spaces(line, pos + 1)
                continue
            if char == ":" and indicator:
                key_allowed = False  # the value of a complex key
                pos = _skip_spaces(line, pos + 1)
                continue
            if char == "#" or (char == "%" and pos == 0):
                return False  # a comment, a directive
            if char in "!&*":  # a tag or an anchor (properties of the node after), an alias
                if char == "*":
                    self.node()
                pos = _skip_spaces(line, _PROPERTY.match(line, pos).end())  # type: ignore[union-attr]
                continue
            if char in "[{'\"":
                row, column = self.row, pos
                line, pos = self.flow(pos) if char in "[{" else self.quoted(pos)
                key_allowed = key_allowed and self.row == row  # a key is on one line
                return self.after_node(line, pos, column, key_allowed)
            if char in "|>":
                self.node()
                self.skip_block_scalar()
                return False
            self.node()  # a plain scalar
            if key_allowed:
                found = _KEY_OR_COMMENT.search(line, pos)
                if found is not None and found.group() == ":":
                    self.open_block(pos)
                    key_allowed = False
                    pos = _skip_spaces(line, found.end())
                    continue
            else:  # a value: a ': ' in it is text (or an error the parser reports)
                found = _COMMENT.search(line, pos)
            return found is None  # ended by a comment, or it may go on past the line
        return False

    def after_node(self, line: str, pos: int, column: int, key_allowed: bool) -> bool:
        """After a flow collection or a quoted scalar that started at ``column``: with a
        ``:`` after it, it was a key (of a block mapping there, when a key may start)."""
        pos = _skip_spaces(line, pos)
        if line[pos : pos + 1] == ":" and line[pos + 1 : pos + 2] in _BLANK:
            if key_allowed:
                self.open_block(column)
            return self.line(line, _skip_spaces(line, pos + 1), key_allowed=False)
        return False

    def skip_block_scalar(self) -> None:
        """The lines of a block scalar are text: those indented past the collection it is in,
        and blank ones (skipping a line too many only ever counts less)."""
        least = (self.indents[-1] if self.indents else -1) + 1
        self.row += 1
        while self.row < len(self.lines):
            line = self.lines[self.row]
            start = _indent(line)
            if start < len(line) and start < least:
                break
            self.row += 1
        self.row -= 1  # run() moves past the current line

    # ---- spans that may cross lines ---------------------------------------------------

    def at(self, offset: int) -> tuple[str, int]:
        """Move to ``offset`` in ``text``: (its line, its position on it)."""
        self.row = bisect_right(self.starts, offset) - 1
        return self.lines[self.row], offset - self.starts[self.row]

    def quoted(self, pos: int) -> tuple[str, int]:
        self.node()
        offset = self.starts[self.row] + pos
        pattern = _DOUBLE if self.text[offset] == '"' else _SINGLE
        found = pattern.match(self.text, offset)
        return self.at(found.end() if found is not None else len(self.text))

    def flow(self, pos: int) -> tuple[str, int]:
        """A flow collection from its opening bracket at ``pos``; returns where it closes
        (the end of the text if it never does: the parser will say so)."""
        text, size = self.text, len(self.text)
        offset = self.starts[self.row] + pos
        base = len(self.indents)
        depth = 0
        in_plain = False  # a plain scalar ran to a line break: it may go on after it
        while offset < size:
            char = text[offset]
            if char in " \t":
                offset += 1
                continue
            if char == "\n":
                self.row += 1
                offset += 1
                continue
            plain_char = char not in ",[]{}#'\"?:!&*" or (
                char in "?:" and text[offset + 1 : offset + 2] not in ("", " ", "\t", "\n")
            )
            if in_plain and (plain_char or char in "'\"!&*"):
                offset = self.plain_in_flow(offset)  # the same scalar, on a new line
                continue
            in_plain = False
            if char in "[{":
                depth += 1
                self.level(base + depth)
                offset += 1
            elif char in "]}":
                depth -= 1
                offset += 1
                if depth == 0:
                    return self.at(offset)
            elif char == ",":
                offset += 1
            elif char == "#":
                end = text.find("\n", offset)
                offset = size if end < 0 else end
            elif char in "'\"":
                self.node()
                found = (_DOUBLE if char == '"' else _SINGLE).match(text, offset)
                end = found.end() if found is not None else size
                self.row += text.count("\n", offset, end)
                offset = end
            elif char in "!&*":
                if char == "*":
                    self.node()
                offset = _PROPERTY.match(text, offset).end()  # type: ignore[union-attr]
            elif not plain_char:  # '?' or ':' as an indicator
                offset += 1
            else:
                self.node()
                offset = self.plain_in_flow(offset)
                in_plain = text[offset : offset + 1] == "\n"
        return self.at(size)

    def plain_in_flow(self, offset: int) -> int:
        """Where a flow-context plain scalar's text on this line ends."""
        found = _FLOW_PLAIN_END.search(self.text, offset + 1)
        return found.start() if found is not None else len(self.text)


def check_shape(text: str) -> None:
    """Raise ``ShapeRefused`` when ``text`` nests deeper than ``MAX_DEPTH`` levels or holds
    more than ``MAX_NODES`` nodes (counted the composer's way: a collection and each scalar
    in it, keys included, one level per collection), at the line where it first does."""
    _Scan(_normalised(text), MAX_DEPTH, MAX_NODES).run()


def measure(text: str) -> Shape:
    """The whole of ``text``'s shape as the scan counts it (no limits: for tests and
    benchmarks)."""
    scan = _Scan(_normalised(text), math.inf, math.inf)
    scan.run()
    return Shape(scan.deepest, scan.nodes)


def _normalised(text: str) -> str:
    """Line breaks as the parsers count them (CRLF and CR are one break), no byte-order mark."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text
