"""Grep's rg stopped mid-search (the run cancelled, its deadline passed) in every output mode:
rg killed and reaped, the answer an error, no descriptor of its output file left open; and its
output file where the kernel has no ``memfd_create`` (a temporary file instead).

rg is held mid-search by a named pipe given as the path: it blocks opening it until a
writer comes, which none does."""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
import time
from pathlib import Path

import pytest

from subagents.tools.base import ToolError
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.processes import ProcessGroups

from .conftest import make_context, wait_until

TOOLS = builtin_tools()
MODES = ["files_with_matches", "content", "count"]


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def searching(fifo: Path) -> list[int]:
    """Live processes whose command line names ``fifo`` (rg searching it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if os.fsencode(fifo) in argv and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.fixture
def fifo(repo: Path) -> Path:
    path = repo / "held.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("mode", MODES)
def test_a_cancelled_search_kills_rg_and_leaves_no_descriptor(
    repo: Path, processes: ProcessGroups, fifo: Path, mode: str
) -> None:
    cancel = threading.Event()
    ctx = make_context(repo, processes, cancel=cancel)
    before = open_fds()
    answer: list[BaseException | str] = []

    def call() -> None:
        try:
            arguments = {"pattern": "x", "path": str(fifo), "output_mode": mode}
            answer.append(TOOLS["Grep"].call(arguments, ctx))
        except ToolError as e:
            answer.append(e)

    caller = threading.Thread(target=call)
    caller.start()
    wait_until(lambda: bool(searching(fifo)), what="rg blocked on the fifo")
    cancel.set()
    caller.join(120)
    assert not caller.is_alive()
    assert isinstance(answer[0], ToolError)
    assert "cancelled" in str(answer[0])
    assert searching(fifo) == []  # killed and reaped, not left behind
    assert open_fds() <= before  # its output file (and stderr's pipe) closed


@pytest.mark.parametrize("mode", MODES)
def test_a_search_past_the_deadline_is_an_error_and_leaves_no_descriptor(
    repo: Path, processes: ProcessGroups, fifo: Path, mode: str
) -> None:
    # the run's deadline comes while rg is held (a deadline already past would be refused
    # before rg starts, or not: either way no rg and no descriptor may be left)
    ctx = dataclasses.replace(make_context(repo, processes), deadline=time.monotonic() + 0.5)
    before = open_fds()
    with pytest.raises(ToolError, match="timed out"):
        TOOLS["Grep"].call({"pattern": "x", "path": str(fifo), "output_mode": mode}, ctx)
    assert searching(fifo) == []
    assert open_fds() <= before


@pytest.mark.parametrize("kernel", ["no memfd_create", "memfd_create refused"])
@pytest.mark.parametrize("mode", MODES)
def test_without_memfd_rgs_output_goes_to_a_temporary_file(
    context: ToolContext, repo: Path, monkeypatch: pytest.MonkeyPatch, kernel: str, mode: str
) -> None:
    expected = TOOLS["Grep"].call({"pattern": "add", "output_mode": mode}, context)
    if kernel == "no memfd_create":
        monkeypatch.delattr(os, "memfd_create")
    else:

        def refused(*_: object) -> int:
            raise OSError(errno.ENOSYS, "Function not implemented")

        monkeypatch.setattr(os, "memfd_create", refused)
    assert TOOLS["Grep"].call({"pattern": "add", "output_mode": mode}, context) == expected
