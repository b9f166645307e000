"""Running git: one function, errors that say which command failed, where, and why.

git is a program the user has, not a library: each call is a subprocess with a timeout,
without a terminal prompt (a credential question would hang a run), in the C locale so
messages can be recognised.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 60.0


class GitError(RuntimeError):
    """A git command that failed; the message has the command, the directory and git's words."""

    def __init__(self, message: str, *, stderr: str = "") -> None:
        self.stderr = stderr
        super().__init__(message)


def git(cwd: Path, *args: str, timeout: float = GIT_TIMEOUT_S) -> str:
    """``git -C cwd args...``'s standard output (stripped); ``GitError`` when it fails."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C", LANG="C")
    command = ["git", "-C", str(cwd), *args]
    shown = "git " + " ".join(args)
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
