"""Shell command lines read well enough for two decisions, and no more.

1. **Which commands a line runs**, for deny rules (``commands_run``): every simple command,
   those inside ``$(...)``, backticks, subshells, ``sh -c '...'``, ``eval``, ``xargs`` and
   ``find -exec`` included, each named by its program however it is written (``/bin/rm``,
   ``command rm``, ``\\rm``, ``'rm'``, ``env rm``, ``timeout 5 rm``...). A program whose
   name is computed (``$X``, a glob) cannot be named: the caller is told so.
2. **Whether a line provably only reads** (``is_read_only``), an allowlist: a line is
   read-only only when it is plain (commands joined by ``|``, ``&&``, ``||``, ``;``, no
   substitution, subshell, group, control keyword, background ``&``, here-document, and no
   redirection but input and ``2>&1`` / ``>/dev/null``) and every command is a known reader
   named plainly (no leading ``NAME=value``, no path, no quotes), without an option that
   runs a program or writes a file (``git -c``, ``--config-env``, ``grep -O``,
   ``--ext-diff``, ``--output``, ``find -delete``/``-exec``, ``rg --pre``...). Anything this
   module does not understand is not read-only.

Neither is a security boundary: a shell is too rich to be judged by reading its line. What
these decide is what runs without asking; the kernel sandbox bounds what a command can do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_]")
_WORD_END = re.compile(r"[\s;&|()<>]|$")
_MAX_NESTING = 16

PLAIN_JOINS = frozenset({"sequence", "and", "or", "pipe"})
"""What may join the commands of a line that is still plain."""

READ_ONLY_COMMANDS = frozenset(
    {
        "basename", "cat", "cmp", "cut", "date", "df", "diff", "dirname", "du", "echo",
        "false", "file", "grep", "egrep", "fgrep", "head", "ls", "nl", "pwd", "readlink",
        "realpath", "rg", "stat", "tail", "tree", "true", "uname", "wc", "which", "whoami",
    }
)  # fmt: skip
READ_ONLY_GIT = frozenset(
    {
        "blame", "describe", "diff", "grep", "log", "ls-files", "ls-tree", "rev-parse",
        "shortlog", "show", "status",
    }
)  # fmt: skip
_GIT_SAFE_GLOBALS = frozenset(
    {"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"}
)
_GIT_RUNS_OR_WRITES = ("--output", "--ext-diff", "--open-files-in-pager", "--exec")
"""Long options (git takes any unambiguous prefix of them) that write or run a program."""
_FIND_RUNS_OR_WRITES = frozenset(
    {"-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_BLOCKED_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    # command: (long options that run a program or write, short letters that do)
    "rg": (("--pre", "--hostname-bin"), ""),
    "tree": (("--output",), "o"),
    "date": (("--set",), "s"),
    "file": (("--compile",), "C"),
}
_LITERAL_ARGS = frozenset({"git", "find", *_BLOCKED_OPTIONS})
"""Commands whose arguments must be literal: a glob or ``$X`` could become an option."""

_KEYWORDS = frozenset(
    {
        "if", "then", "elif", "else", "fi", "for", "while", "until", "do", "done", "case",
        "esac", "select", "function", "!", "{", "}", "[[", "]]", "time", "coproc",
    }
)  # fmt: skip
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "yash", "fish"})

# wrappers that run the command after their options: name -> (options taking an argument,
# positional arguments before the command)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "env": (frozenset({"-u", "-C", "--unset", "--chdir"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}), 0),
    "doas": (frozenset({"-u", "-C"}), 0),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u"}), 0),
    "setsid": (frozenset(), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
    "xargs": (
        frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter",
                   "--max-args", "--max-procs", "--max-chars", "--max-lines", "--replace",
                   "--eof", "--process-slot-var"}),
        0,
    ),
    "flock": (frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), 1),
    "watch": (frozenset({"-n", "--interval"}), 0),
    "busybox": (frozenset(), 0),
}  # fmt: skip


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
        if depth > _MAX_NESTING:
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


# ---- read-only -------------------------------------------------------------------------------


def is_read_only(line: str) -> bool:
    """Whether ``line`` provably only reads (see the module's docstring)."""
    script = parse(line)
    return script.plain and all(reads_only(c) for c in script.commands)


def reads_only(command: Command) -> bool:
    """Whether one simple command is a known reader, named plainly, with safe options."""
    if command.writes or command.nested or not command.words:
        return False
    program, args = command.words[0], command.words[1:]
    if not program.plain or "/" in program.text or _ASSIGNMENT.match(program.text):
        return False
    name = program.text
    if name in _LITERAL_ARGS and not all(a.literal for a in args):
        return False
    texts = [a.text for a in args]
    if name == "git":
        return _git_reads_only(texts)
    if name == "find":
        return not any(a in _FIND_RUNS_OR_WRITES for a in texts)
    if name not in READ_ONLY_COMMANDS:
        return False
    long, short = _BLOCKED_OPTIONS.get(name, ((), ""))
    return not any(_hits(a, long, short) for a in texts)


def _hits(arg: str, long: tuple[str, ...], short: str) -> bool:
    """Whether ``arg`` is one of the ``long`` options (or a prefix of one, as GNU and git
    accept) or a short-option cluster with one of the ``short`` letters."""
    if arg == "--" or not arg.startswith("-"):
        return False
    if arg.startswith("--"):
        name = arg.split("=", 1)[0]
        return len(name) > 3 and any(option.startswith(name) for option in long)
    return any(letter in arg[1:] for letter in short)


def _git_reads_only(args: list[str]) -> bool:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "-C" and i + 1 < len(args):
            i += 2
        elif args[i] in _GIT_SAFE_GLOBALS:
            i += 1
        else:  # -c, --config-env, --exec-path, -p, --git-dir...: not proven harmless
            return False
    if i >= len(args) or args[i] not in READ_ONLY_GIT:
        return False
    sub, rest = args[i], args[i + 1 :]
    for arg in rest:
        if arg == "--":
            break
        if _hits(arg, _GIT_RUNS_OR_WRITES, "O" if sub == "grep" else ""):
            return False  # grep -O<pager>, --open-files-in-pager, --ext-diff, --output=...
    return True


# ---- the commands a line runs ------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    """A command a line runs, as deny rules see it: its program's bare name and its
    arguments (``("rm", "-rf", "x")``); ``known`` is False when the program's name is
    computed (``$X``, a glob), so no rule can tell what it is."""

    words: tuple[str, ...]
    known: bool = True

    @property
    def text(self) -> str:
        return " ".join(self.words)


def commands_run(line: str) -> list[Ran] | None:
    """Every command ``line`` runs, however named (see the module's docstring); None when the
    line cannot be read."""
    script = parse(line)
    if script.error is not None:
        return None
    out: list[Ran] = []
    for command in script.commands:
        out.extend(_runs(command.words, 0))
    return out


def _runs(words: list[Word], depth: int) -> Iterator[Ran]:
    """The commands one simple command runs: itself, and what it wraps or hands a string."""
    i = 0
    while i < len(words) and (_ASSIGNMENT.match(words[i].text) or words[i].text in _KEYWORDS):
        i += 1
    if i >= len(words) or depth > _MAX_NESTING:
        return
    program, args = words[i], words[i + 1 :]
    if not program.literal:
        yield Ran((program.text,), known=False)
        return
    name = program.text.rsplit("/", 1)[-1]
    texts = tuple(a.text for a in args)
    if name == "git":
        yield Ran(("git", *_git_without_globals(list(texts))))
    else:
        yield Ran((name, *texts))
    if name == "watch":  # watch runs its arguments as one shell command
        wrapped = _after_options(name, args)
        ran = commands_run(" ".join(w.text for w in wrapped))
        known = all(w.literal for w in wrapped) and ran is not None
        yield from ran if ran is not None and known else (Ran((name,), known=False),)
    elif name in _WRAPPERS:
        yield from _runs(_after_options(name, args), depth + 1)
    elif name in _SHELLS or name == "eval":
        code = _shell_string(name, args)
        if code is None:
            return
        if not code[1]:
            yield Ran((name, "-c", code[0]), known=False)
            return
        ran = commands_run(code[0])
        yield from ran if ran is not None else (Ran((name,), known=False),)
    elif name == "find":
        yield from _find_runs(args, depth)
    if name == "env":  # env -S 'rm x' splits its string into a command
        for j, arg in enumerate(args[:-1]):
            if arg.text in ("-S", "--split-string"):
                ran = commands_run(args[j + 1].text)
                yield from ran if ran is not None else ()


def _after_options(name: str, args: list[Word]) -> list[Word]:
    """The words of the command a wrapper runs: its options, their arguments, assignments
    (``env``) and positional arguments (``timeout``'s duration) skipped."""
    with_arg, positional = _WRAPPERS[name]
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if name == "env" and _ASSIGNMENT.match(text):
            i += 1
        elif text.startswith("-") and len(text) > 1:
            i += 2 if text in with_arg else 1
        elif name == "nice" and text.startswith("+"):
            i += 1
        else:
            break
    return args[i + positional :]


def _shell_string(name: str, args: list[Word]) -> tuple[str, bool] | None:
    """The code ``sh -c CODE`` or ``eval ARGS`` runs, and whether it is literal."""
    if name == "eval":
        return " ".join(a.text for a in args), all(a.literal for a in args)
    for j, arg in enumerate(args):
        text = arg.text
        if not text.startswith("-") or text == "-" or text == "--":
            return None  # a script file, or stdin: nothing on the line to read
        if "c" in text[1:] and not text.startswith("--") and j + 1 < len(args):
            return args[j + 1].text, args[j + 1].literal
    return None


def _find_runs(args: list[Word], depth: int) -> Iterator[Ran]:
    texts = [a.text for a in args]
    for j, text in enumerate(texts):
        if text in _FIND_RUNS:
            end = j + 1
            while end < len(texts) and texts[end] not in (";", "+"):
                end += 1
            yield from _runs(args[j + 1 : end], depth + 1)
        elif text == "-delete":  # removes what it finds: what rules about rm are for
            paths = []
            for path in texts:
                if path.startswith(("-", "(", "!")):
                    break
                paths.append(path)
            yield Ran(("rm", *paths))


def _git_without_globals(args: list[str]) -> list[str]:
    """``git -C d -c k=v push`` -> ``push``: the subcommand first, for deny rules."""
    with_arg = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                "--super-prefix", "--exec-path"}  # fmt: skip
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 2 if args[i] in with_arg else 1
    return args[i:]
