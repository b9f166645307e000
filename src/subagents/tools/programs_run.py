"""The programs a shell line runs, as deny rules see them (``commands_run``).

Every simple command counts, those inside ``$(...)``, backticks, subshells, ``sh -c '...'``,
``eval``, ``xargs`` and ``find -exec`` included, each named by its program however it is
written (``/bin/rm``, ``command rm``, ``\\rm``, ``'rm'``, ``env rm``, ``timeout 5 rm``...): a
wrapper is looked through to the command it runs, ``find -delete`` counts as ``rm``. A program
whose name is computed (``$X``, a glob) cannot be named: the caller is told so (``Ran.known``).
The line is read by ``tools.shellwords``; what runs is decided by rules (``tools.rules``), and
bounded by the kernel sandbox.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from subagents.tools.shellwords import ASSIGNMENT, MAX_NESTING, Word, parse

_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
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
    while i < len(words) and (ASSIGNMENT.match(words[i].text) or words[i].text in _KEYWORDS):
        i += 1
    if i >= len(words) or depth > MAX_NESTING:
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
        if name == "env" and ASSIGNMENT.match(text):
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
