"""Workspace: the one directory tree a run's file tools may touch, and where Bash starts.

Every path a model gives is resolved the way the operating system would open it (``..``
and every symlink followed) before it is compared with the workspace, so neither ``../x``,
an absolute path elsewhere, nor a symlink pointing out of the tree reaches outside. The
refusal is an ``is_error`` result naming the path and the workspace, so the model knows why.

(A symlink swapped in between the check and the open could redirect a call: Write, Edit
and NotebookEdit therefore reach the file's directory again from the root without following
any symlink (``filestate.write_text``); a read could still be redirected, and reads are not
restricted for the processes tools start either unless the owner says so. The processes
tools start are bounded by the kernel instead: ``tools.sandbox``.)

Inside the tree, the run store's files are refused too when it lies there (``sealed``).
"""

from __future__ import annotations

import os
from pathlib import Path

from subagents.tools.errors import ToolError
from subagents.tools.sealed import SealedFiles


class Workspace:
    """A directory tree: ``resolve`` turns a model's path into a real path inside it.
    ``sealed``: the run store's files, which no path may name (the runtime's store)."""

    __slots__ = ("root", "sealed")

    def __init__(self, root: str | os.PathLike[str], sealed: SealedFiles | None = None) -> None:
        path = Path(root).expanduser()
        if not path.is_dir():
            raise ValueError(f"workspace {str(root)!r} is not a directory")
        self.root = Path(os.path.realpath(path))
        self.sealed = sealed

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def resolve(self, path: str, *, what: str = "path") -> Path:
        """``path`` (absolute, or relative to the root) as a real path inside the workspace;
        ToolError when it is empty or lands outside."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError(f"{what} is empty: give an absolute path inside {self.root}")
        if "\x00" in path:
            raise ToolError(f"{what} {path!r} contains a NUL character")
        given = Path(path)
        joined = given if given.is_absolute() else self.root / given
        try:
            real = Path(os.path.realpath(joined))
        except OSError as exc:  # a symlink on the path changed while it was read: a race
            raise ToolError(f"{what} {path} could not be resolved: {exc.strerror or exc}") from None
        if not self.contains(real):
            raise ToolError(
                f"{path} is outside the workspace {self.root}: file tools can only reach"
                f" files inside it"
            )
        if self.sealed is not None:
            self.sealed.refuse(real, path)
        return real

    def contains(self, real: Path) -> bool:
        """Whether an already resolved path is the root or below it."""
        return real == self.root or real.is_relative_to(self.root)

    def relative(self, real: Path) -> str:
        """``real`` relative to the root, with '/' separators ('.' for the root)."""
        return real.relative_to(self.root).as_posix() if real != self.root else "."
