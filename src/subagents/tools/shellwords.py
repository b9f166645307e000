"""Shell command lines read into their simple commands and words, well enough for two
decisions and no more (each in a module of its own):

1. **Which commands a line runs**, for deny rules (``tools.programs_run.commands_run``).
2. **Whether a line provably only reads** (``tools.read_only_commands.is_read_only``).

This module is the reader both use: ``parse`` reads a line (a pragmatic subset of bash's
grammar: quotes, escapes, ``$(...)``, backticks, subshells, groups, redirections,
here-documents, control keywords) into a ``Script`` of ``Command``s of ``Word``s, each word
knowing whether anything in it is expanded. Anything it cannot read is an ``error``, which
both decisions treat as the cautious answer.

Neither decision is a security boundary: a shell is too rich to be judged by reading its line.
What they decide is what runs without asking; the kernel sandbox bounds what a command can do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
"""A word that is a ``NAME=value`` assignment (``NAME[i]=``, ``NAME+=`` too), not a program."""
_NAME_CHAR = re.compile(r"[A-Za-z0-9_]")
_WORD_END = re.compile(r"[\s;&|()<>]|$")
MAX_NESTING = 16
"""How deep substitutions, subshells and wrapped commands are followed; deeper is unread."""

PLAIN_JOINS = frozenset({"sequence", "and", "or", "pipe"})
"""What may join the commands of a line that is still plain."""


@dataclass(frozen=True)
class Word:
    """One word of a command: ``text`` with quotes and backslashes removed (expansions kept
    as written); ``literal`` when nothing in it is expanded (no unquoted ``$``, backtick,
    glob or brace); ``plain`` when written with no quote or backslash either."""

    text: str
    literal: bool = True
    plain: bool = True


@dataclass
class Command:
    """One simple command: its words (assignments included), whether it writes a file by a
    redirection, and whether it is nested (in a substitution, a subshell, ``sh -c``...)."""

    words: list[Word] = field(default_factory=list)
    writes: bool = False
    nested: bool = False


@dataclass
class Script:
    """A line read: its simple commands, everywhere, and what joins or wraps them."""

    commands: list[Command] = field(default_factory=list)
    constructs: set[str] = field(default_factory=set)
    error: str | None = None

    @property
    def plain(self) -> bool:
        """Commands joined only by ``|``, ``&&``, ``||``, ``;`` (and read as a whole)."""
        return self.error is None and bool(self.commands) and self.constructs <= PLAIN_JOINS


class _Unclosed(Exception):
    pass


@dataclass
class _Pending:
    """What ``_Reader.commands`` is in the middle of: the command, the word (its parts so
    far, None between words) with its ``literal`` and ``plain`` flags, and the redirection
    operator the word is the target of."""

    cmd: Command
    word: list[str] | None = None
    literal: bool = True
    plain: bool = True
    redirect: str | None = None


class _Reader:
    """A recursive reader of a bash line (a pragmatic subset of bash's grammar)."""

    def __init__(self, text: str, script: Script, depth: int = 0, nested: bool = False) -> None:
        self.s = text
        self.i = 0
        self.script = script
        self.depth = depth
        self.nested = nested
        self.heredocs: list[tuple[str, bool, bool]] = []
        """Here-documents whose bodies start at the next newline: (delimiter, quoted, <<-)."""
        if depth > MAX_NESTING:
            raise _Unclosed("nested too deeply")

    # -- commands ---------------------------------------------------------------------------

    def commands(self, stop: str | None = None) -> None:
        """Read commands until ``stop`` (``)``) or the end; ``_Unclosed`` if ``stop`` is missing."""
        s, n = self.s, len(self.s)
        p = _Pending(Command(nested=self.nested))
        while self.i < n:
            c = s[self.i]
            if c in " \t":
                self._end_word(p)
                self.i += 1
            elif c == "#" and p.word is None:
                while self.i < n and s[self.i] != "\n":
                    self.i += 1
            elif c in ";\n":
                self._end_command(p, "sequence")
                self.i += 1
                if c == "\n" and self.heredocs:
                    self._heredoc_bodies()
            elif c in "&|":
                self._control(p, c)
            elif c == "(":
                self._end_command(p, "subshell")
                self.i += 1
                self.commands(stop=")")
            elif c == ")":
                if stop == ")":
                    self._end_command(p, None)
                    self.i += 1
                    return
                self._end_command(p, "unbalanced")  # a case pattern, or a syntax error: not plain
                self.i += 1
            elif c in "<>":
                self._angle(p)
            else:
                if p.word is None:
                    p.word = []
                part, lit, pl = self._word_part()
                p.word.append(part)
                p.literal, p.plain = p.literal and lit, p.plain and pl
        if stop is not None:
            raise _Unclosed(f"a {stop!r} is missing")
        self._end_command(p, None)

    def _end_word(self, p: _Pending) -> None:
        """The word being read ends: a redirection's target, or the command's next word."""
        if p.word is None:
            return
        text = "".join(p.word)
        if p.redirect is not None:
            self._redirected(p.cmd, p.redirect, text, p.literal)
            if p.redirect in ("<<", "<<-"):
                self.heredocs.append((text, not p.plain, p.redirect == "<<-"))
            p.redirect = None
        else:
            p.cmd.words.append(Word(text, p.literal, p.plain))
        p.word, p.literal, p.plain = None, True, True

    def _end_command(self, p: _Pending, join: str | None) -> None:
        """The command being read ends (joined to the next by ``join``, if any)."""
        self._end_word(p)
        if p.cmd.words or p.cmd.writes:
            self.script.commands.append(p.cmd)
        if join is not None:
            self.script.constructs.add(join)
        p.cmd = Command(nested=self.nested)

    def _control(self, p: _Pending, c: str) -> None:
        """At ``&`` or ``|``: ``&&``, ``||``, a pipe, a background ``&``, or ``&>``."""
        s = self.s
        if c == "&":
            if s.startswith("&&", self.i):
                self._end_command(p, "and")
                self.i += 2
            elif s.startswith("&>", self.i):
                self._end_word(p)
                p.redirect = "&>>" if s.startswith("&>>", self.i) else "&>"
                self.i += len(p.redirect)
            else:
                self._end_command(p, "background")
                self.i += 1
        elif s.startswith("||", self.i):
            self._end_command(p, "or")
            self.i += 2
        else:
            self._end_command(p, "pipe")
            self.i += 2 if s.startswith("|&", self.i) else 1

    def _angle(self, p: _Pending) -> None:
        """At ``<`` or ``>``: a process substitution (part of the word), or a redirection."""
        if self.s.startswith(("<(", ">("), self.i):  # process substitution
            self.script.constructs.add("process substitution")
            self.i += 2
            self._nested(stop=")")
            p.literal = False
            if p.word is None:
                p.word = []
            return
        if p.word is not None and not p.redirect and p.word and all(x.isdigit() for x in p.word):
            p.word = None  # the descriptor number of a redirection (2>...)
        else:
            self._end_word(p)
        p.redirect = self._operator()

    def _heredoc_bodies(self) -> None:
        """Skip the bodies of the pending here-documents (text, not commands), reading the
        substitutions of those whose delimiter is unquoted (``$(...)`` there runs)."""
        s, n = self.s, len(self.s)
        for delimiter, quoted, strip in self.heredocs:
            while self.i < n:
                end = s.find("\n", self.i)
                end = n if end < 0 else end
                line = s[self.i : end]
                self.i = min(end + 1, n)
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                if not quoted:
                    self._expansions(line)
        self.heredocs = []

    def _expansions(self, text: str) -> None:
        """The commands inside ``$(...)`` and backticks of ``text`` (a here-document line)."""
        reader = _Reader(text, self.script, self.depth + 1, nested=True)
        while reader.i < len(text):
            c = text[reader.i]
            if c == "\\":
                reader.i += 2
            elif c == "$":
                reader._dollar()
            elif c == "`":
                reader._backticks()
            else:
                reader.i += 1

    def _operator(self) -> str:
        for op in ("<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">"):
            if self.s.startswith(op, self.i):
                self.i += len(op)
                if op in ("<<", "<<-"):
                    self.script.constructs.add("here-document")
                return op
        raise AssertionError("not an operator")  # pragma: no cover

    def _redirected(self, cmd: Command, op: str, target: str, literal: bool) -> None:
        if target.startswith(("/dev/tcp/", "/dev/udp/")):
            self.script.constructs.add("network redirection")
        if op in (">&", "<&") and (target.isdigit() or target == "-"):
            return  # descriptor plumbing: 2>&1
        if op in ("<", "<<<", "<<", "<<-"):
            return  # input
        if op in (">", ">>", ">|", "&>", "&>>") and target == "/dev/null" and literal:
            return
        cmd.writes = True

    # -- words ------------------------------------------------------------------------------

    def _word_part(self) -> tuple[str, bool, bool]:
        """One piece of a word at ``self.i``: (its text, literal, plain)."""
        s, n, c = self.s, len(self.s), self.s[self.i]
        if c == "\\":
            if self.i + 1 < n and s[self.i + 1] == "\n":  # a line continuation
                self.i += 2
                return "", True, True
            self.i += 2
            return s[self.i - 1 : self.i], True, False
        if c == "'":
            end = s.find("'", self.i + 1)
            if end < 0:
                raise _Unclosed("a ' is not closed")
            text = s[self.i + 1 : end]
            self.i = end + 1
            return text, True, False
        if c == '"':
            self.i += 1
            text, literal = self._double_quoted('"')
            return text, literal, False
        if c == "`":
            self._backticks()
            return "`...`", False, False
        if c == "$":
            return self._dollar()
        self.i += 1
        fixed = not self._expands(c)
        return c, fixed, fixed

    def _expands(self, c: str) -> bool:
        """Whether an unquoted ``c`` (just read) makes its word expand: ``*``, ``?``, a ``[``
        closed later in the word (``r[m]``), a ``{`` of a brace list (``{r,}m``, ``{1..3}``).
        A lone ``[`` (the test command) or ``{`` (a group) does not."""
        if c in "*?":
            return True
        if c not in "[{":
            return False
        found = _WORD_END.search(self.s, self.i)
        rest = self.s[self.i : found.start() if found else len(self.s)]
        if c == "[":
            return "]" in rest
        close = rest.find("}")
        return close > 0 and ("," in rest[:close] or ".." in rest[:close])

    def _double_quoted(self, end: str) -> tuple[str, bool]:
        """Read up to ``end`` (``"``, or ``}`` of ``${...}``): (text, literal)."""
        s, n = self.s, len(self.s)
        out: list[str] = []
        literal = True
        depth = 0
        while self.i < n:
            c = s[self.i]
            if c == end and depth == 0:
                self.i += 1
                return "".join(out), literal
            if c == "\\" and self.i + 1 < n:
                nxt = s[self.i + 1]
                out.append(nxt if nxt in '$`"\\\n}' else c + nxt)
                self.i += 2
            elif c == "`":
                self._backticks()
                out.append("`...`")
                literal = False
            elif c == "$":
                text, _, _ = self._dollar()
                out.append(text)
                literal = False
            else:
                if end == "}" and c == "{":
                    depth += 1
                elif end == "}" and c == "}":
                    depth -= 1
                out.append(c)
                self.i += 1
        raise _Unclosed(f"a {end!r} is missing")

    def _dollar(self) -> tuple[str, bool, bool]:
        s, n = self.s, len(self.s)
        start = self.i
        nxt = s[self.i + 1] if self.i + 1 < n else ""
        if nxt == "(":
            if s.startswith("$((", self.i):
                self.script.constructs.add("arithmetic")
            else:
                self.script.constructs.add("substitution")
            self.i += 2
            self._nested(stop=")")
            return s[start : self.i], False, False
        if nxt == "{":
            self.i += 2
            self._double_quoted("}")
            return s[start : self.i], False, False
        if nxt == "'":  # $'...': ANSI-C quoting, a literal once decoded
            end = self.i + 2
            while end < n and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            if end >= n:
                raise _Unclosed("a $' is not closed")
            raw = s[self.i + 2 : end]
            self.i = end + 1
            try:
                return raw.encode("latin-1").decode("unicode_escape"), True, False
            except (UnicodeDecodeError, UnicodeEncodeError):
                return raw, False, False
        if nxt == '"':
            self.i += 2
            text, literal = self._double_quoted('"')
            return text, literal, False
        self.i += 1
        if nxt and (nxt in "@*#?$!-" or nxt.isdigit()):
            self.i += 1
        else:
            while self.i < n and _NAME_CHAR.match(s[self.i]):
                self.i += 1
        if self.i == start + 1:
            return "$", True, True  # a lone dollar is itself
        return s[start : self.i], False, False

    def _backticks(self) -> None:
        s, n = self.s, len(self.s)
        self.script.constructs.add("substitution")
        j = self.i + 1
        inner: list[str] = []
        while j < n and s[j] != "`":
            if s[j] == "\\" and j + 1 < n:
                inner.append(s[j + 1] if s[j + 1] in "`\\$" else s[j : j + 2])
                j += 2
            else:
                inner.append(s[j])
                j += 1
        if j >= n:
            raise _Unclosed("a ` is not closed")
        self.i = j + 1
        _Reader("".join(inner), self.script, self.depth + 1, nested=True).commands()

    def _nested(self, stop: str) -> None:
        reader = _Reader(self.s, self.script, self.depth + 1, nested=True)
        reader.i = self.i
        reader.commands(stop=stop)
        self.i = reader.i


def parse(line: str) -> Script:
    """``line`` read into its commands; ``error`` set when it cannot be read (a quote or a
    parenthesis left open)."""
    script = Script()
    try:
        _Reader(line, script).commands()
    except _Unclosed as exc:
        script.error = str(exc)
    return script
