"""Shell command lines cut into simple commands, and which of them only read.

Why: a permission rule such as ``Bash(git diff:*)`` must hold for every command of a line
(``git diff && rm -rf x`` is not a ``git diff``), and ``plan`` mode and the default mode let
through the commands that cannot change anything. The test is deliberately conservative: a
line with command substitution, process substitution, an output redirection, or a command
not known to be read-only is not read-only.
"""

from __future__ import annotations

import re
import shlex

_UNSAFE = re.compile(r"`|\$\(|<\(|>\(")
_HARMLESS_REDIRECT = re.compile(r"\d*>>?&\d+|\d*>>?\s*/dev/null|\d*<&\d+")
"""``2>&1``, ``>/dev/null``: descriptor plumbing that writes no file, dropped before cutting."""
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

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
_WRITING_OPTIONS = {
    "find": (
        "-delete",
        "-exec",
        "-execdir",
        "-ok",
        "-okdir",
        "-fprint",
        "-fprint0",
        "-fprintf",
        "-fls",
    ),
    "rg": ("--pre",),
    "tree": ("-o",),
    "git": ("--output", "-o"),
}


def split_line(line: str) -> list[str] | None:
    """The simple commands of ``line`` as text (cut at ``&&``, ``||``, ``;``, ``|``, ``&``
    and newlines outside quotes); None when a quote is left open."""
    line = _HARMLESS_REDIRECT.sub(" ", line.replace("\\\n", " "))
    parts: list[str] = []
    current: list[str] = []
    quote: str | None = None
    i, n = 0, len(line)
    while i < n:
        char = line[i]
        if quote is not None:
            current.append(char)
            if char == "\\" and quote == '"' and i + 1 < n:
                current.append(line[i + 1])
                i += 1
            elif char == quote:
                quote = None
        elif char == "\\" and i + 1 < n:
            current.append(line[i : i + 2])
            i += 1
        elif char in "'\"":
            quote = char
            current.append(char)
        elif char in ";&|\n":
            parts.append("".join(current))
            current = []
            while i + 1 < n and line[i + 1] in "&|":  # && || |& are one separator
                i += 1
        else:
            current.append(char)
        i += 1
    if quote is not None:
        return None
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def split_commands(line: str) -> list[list[str]] | None:
    """The simple commands of ``line`` as word lists (see ``split_line``)."""
    texts = split_line(line)
    if texts is None:
        return None
    try:
        return [shlex.split(text) for text in texts]
    except ValueError:
        return None


def command_words(words: list[str]) -> list[str]:
    """A simple command without its leading ``NAME=value`` assignments."""
    i = 0
    while i < len(words) and _ASSIGNMENT.match(words[i]):
        i += 1
    return words[i:]


def has_substitution(line: str) -> bool:
    """Command or process substitution: commands hidden inside words, never auto-allowed."""
    return _UNSAFE.search(line) is not None


def is_read_only(line: str) -> bool:
    """Whether every command of ``line`` is one that only reads (conservatively)."""
    if _UNSAFE.search(line) or _writes_output(line):
        return False
    commands = split_commands(line)
    if not commands:
        return False
    return all(_reads_only(command_words(words)) for words in commands)


def _writes_output(line: str) -> bool:
    """An output redirection other than to /dev/null or between descriptors (``2>&1``)."""
    for match in re.finditer(r"(\d*)>>?\s*(&?)(\S*)", line):
        if match.group(2) == "&" or match.group(3) == "/dev/null":
            continue
        return True
    return False


def _reads_only(words: list[str]) -> bool:
    if not words:
        return False
    name = words[0].rsplit("/", 1)[-1]
    risky = _WRITING_OPTIONS.get(name, ())
    if any(w in risky or any(w.startswith(r + "=") for r in risky) for w in words[1:]):
        return False
    if name == "git":
        sub = next((w for w in words[1:] if not w.startswith("-")), None)
        return sub in READ_ONLY_GIT
    if name == "find":
        return True
    return name in READ_ONLY_COMMANDS
