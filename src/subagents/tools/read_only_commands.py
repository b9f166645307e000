"""Whether a shell line provably only reads (``is_read_only``): an allowlist.

A line is read-only only when it is plain (commands joined by ``|``, ``&&``, ``||``, ``;``, no
substitution, subshell, group, control keyword, background ``&``, here-document, and no
redirection but input and ``2>&1`` / ``>/dev/null``) and every command is a known reader named
plainly (no leading ``NAME=value``, no path, no quotes), without an option that runs a program
or writes a file (``git -c``, ``--config-env``, ``grep -O``, ``--ext-diff``, ``--output``,
``find -delete``/``-exec``, ``rg --pre``...). Anything ``tools.shellwords`` cannot read is not
read-only. What this decides is what runs without asking, not a security boundary (the kernel
sandbox bounds what a command can do).
"""

from __future__ import annotations

from subagents.tools.shellwords import ASSIGNMENT, Command, parse

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
_BLOCKED_OPTIONS: dict[str, tuple[tuple[str, ...], str]] = {
    # command: (long options that run a program or write, short letters that do)
    "rg": (("--pre", "--hostname-bin"), ""),
    "tree": (("--output",), "o"),
    "date": (("--set",), "s"),
    "file": (("--compile",), "C"),
}
_LITERAL_ARGS = frozenset({"git", "find", *_BLOCKED_OPTIONS})
"""Commands whose arguments must be literal: a glob or ``$X`` could become an option."""


def is_read_only(line: str) -> bool:
    """Whether ``line`` provably only reads (see the module's docstring)."""
    script = parse(line)
    return script.plain and all(reads_only(c) for c in script.commands)


def reads_only(command: Command) -> bool:
    """Whether one simple command is a known reader, named plainly, with safe options."""
    if command.writes or command.nested or not command.words:
        return False
    program, args = command.words[0], command.words[1:]
    if not program.plain or "/" in program.text or ASSIGNMENT.match(program.text):
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
