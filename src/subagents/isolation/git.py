"""Running git: one function, errors that say which command failed, where, and why.

git is a program the user has, not a library: each call is a subprocess with a timeout,
without a terminal prompt (a credential question would hang a run), in the C locale so
messages can be recognised.

git runs programs its repository names (hooks, ``core.fsmonitor``, a submodule's own
config), and the runtime runs git where runs write: a worktree run writes its worktree (its
``.git`` file, a repository it adds as a submodule), an editing run at the repository's top
writes ``.git/hooks`` and ``.git/config``. A program planted there ran outside every sandbox,
with the runtime's environment (session 26). So git here runs in a ``GitJail`` when the
runtime sandboxes its runs: under the same launcher as their commands (Landlock, the
seccomp filter, the run store hidden, a scrubbed environment), writing only what the git
command itself must (nothing to look, the git directory and the worktrees' folder to add
or remove a worktree), never the network. A program git runs then reaches no more than
the runs could.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from subagents.tools.sandbox import Sandbox
from subagents.tools.scratch import GIT_DIR, ScratchHomeError, make_dir, remove_dir

GIT_TIMEOUT_S = 60.0


class GitError(RuntimeError):
    """A git command that failed; the message has the command, the directory and git's words."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        self.stderr = stderr
        super().__init__(message)


@dataclass(frozen=True)
class GitJail:
    """The sandbox the runtime's git runs in: the runs' (``sandbox``), read-only unless
    ``writable`` names what the command writes. Without Landlock (the sandbox off, or no
    kernel support) git runs as before: the runs' commands are not held either."""

    sandbox: Sandbox
    writable: tuple[Path, ...] = ()

    def writing(self, *paths: Path) -> GitJail:
        return dataclasses.replace(self, writable=tuple(paths))

    def command(self, argv: list[str], cwd: Path, temp: Path) -> tuple[list[str], dict[str, str]]:
        """``argv`` as the launcher runs it, and its environment."""
        # no git call of the runtime needs the network (none fetches): a hook it runs gets
        # none, though the run that planted it may have been denied it (review, session 26)
        run = self.sandbox.resolve().for_run(
            workspace=cwd, read_only=not self.writable, network=False
        )
        if not run.landlock:
            return argv, _environment(dict(os.environ))
        run = dataclasses.replace(run, writable=self.writable)
        top = _top_of(cwd)
        if run.readable is not None and top is not None:  # reads limited: git reads its repo
            run = dataclasses.replace(run, readable=(*run.readable, top))
        env = _environment(run.environment(temp))
        env["GIT_OPTIONAL_LOCKS"] = "0"  # a look refreshes no index: it writes nothing
        return run.argv(argv, temp), env


def _top_of(cwd: Path) -> Path | None:
    """The nearest directory at or above ``cwd`` holding a ``.git`` (git's own search)."""
    return next((p for p in (cwd, *cwd.parents) if (p / ".git").exists()), None)


def _environment(base: dict[str, str]) -> dict[str, str]:
    return dict(base, GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANG="C")


def git(cwd: Path, *args: str, timeout: float = GIT_TIMEOUT_S, jail: GitJail | None = None) -> str:
    """``git -C cwd args...``'s standard output (stripped); ``GitError`` when it fails.
    ``jail``: run it there (above); None: unconfined, with the runtime's environment."""
    argv, shown = ["git", "-C", str(cwd), *args], "git " + " ".join(args)
    if jail is None:
        return _run(argv, _environment(dict(os.environ)), cwd, shown, timeout)
    # in the user's home of scratch directories, which its namespace covers but for this
    # directory: a hook a run planted reads no other run's files (review, session 27)
    try:
        temp = make_dir(GIT_DIR)  # held: swept by a later process if this one is killed
    except ScratchHomeError as exc:
        raise GitError(f"{shown} was not run: {exc}") from None
    try:
        command, env = jail.command(argv, cwd, temp)
        return _run(command, env, cwd, shown, timeout)
    finally:
        remove_dir(temp)


def _run(command: list[str], env: dict[str, str], cwd: Path, shown: str, timeout: float) -> str:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            env=env,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # no terminal: a program it runs could type into it
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"`{shown}` in {cwd} did not finish within {timeout:g} s") from None
    if done.returncode != 0:
        words = (done.stderr or done.stdout).strip()
        raise GitError(f"`{shown}` failed in {cwd} (exit {done.returncode}): {words}", stderr=words)
    return done.stdout.strip()
