"""A command's output on disk is capped (``ProcessGroups.output_cap``): past it the rest is
dropped and the pipe closed, so the command's next write gets SIGPIPE and ends it; the model
reads a note. Real commands writing as fast as they can (``/dev/zero``, ``yes``): what ends
them is the cap, never a timeout (each wait's timeout is far beyond what they need)."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from subagents.tools.base import ToolResult
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.processes import ProcessGroups

from .conftest import WAIT, make_context

TOOLS = builtin_tools()
CAP = 1024 * 1024
SIGPIPE_EXIT = 128 + 13
SIGPIPED = {SIGPIPE_EXIT, -13}
"""How the command ends: by SIGPIPE (``-13`` when ``bash -c`` ran it in its own process)."""
NOTE = "[output over 1 MB: the rest dropped"


@pytest.fixture
def capped_groups() -> Iterator[ProcessGroups]:
    groups = ProcessGroups(output_cap=CAP)
    yield groups
    groups.kill_all()


def test_a_command_printing_past_the_cap_keeps_only_the_cap(
    capped_groups: ProcessGroups, tmp_path: Path
) -> None:
    process = capped_groups.start("head -c 3000000 /dev/zero", cwd=tmp_path, run_id="r")
    waited = capped_groups.wait(
        process, timeout=WAIT, cancel=threading.Event(), deadline=float("inf")
    )
    assert waited.reason == "exited"
    assert process.output.stat().st_size == CAP
    assert process.dropped
    assert waited.exit_code in SIGPIPED  # told by its next write, not killed by us


def test_output_up_to_the_cap_is_kept_whole(capped_groups: ProcessGroups, tmp_path: Path) -> None:
    process = capped_groups.start(f"head -c {CAP} /dev/zero", cwd=tmp_path, run_id="r")
    waited = capped_groups.wait(
        process, timeout=WAIT, cancel=threading.Event(), deadline=float("inf")
    )
    assert (waited.exit_code, process.output.stat().st_size) == (0, CAP)
    assert not process.dropped


def test_bash_names_the_cap(capped_groups: ProcessGroups, tmp_path: Path) -> None:
    context = make_context(tmp_path, capped_groups)
    out = TOOLS["Bash"].run({"command": "yes"}, context)
    assert isinstance(out, ToolResult) and out.is_error
    assert out.content.startswith(f"Exit code {SIGPIPE_EXIT}\ny\ny\n")
    assert NOTE in out.content


def test_a_background_yes_stops_at_the_cap(capped_groups: ProcessGroups, tmp_path: Path) -> None:
    context: ToolContext = make_context(tmp_path, capped_groups)
    started = TOOLS["Bash"].run({"command": "yes", "run_in_background": True}, context)
    assert isinstance(started, ToolResult)
    shell_id = started.content.rsplit(" ", 1)[1]
    process = capped_groups.get(context.run_id, shell_id)
    assert process is not None
    assert process.wait(WAIT) in SIGPIPED
    assert process.output.stat().st_size == CAP
    seen = TOOLS["BashOutput"].call({"bash_id": shell_id}, context)
    assert "<status>completed</status>" in seen and NOTE in seen


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A real tmpfs of 1 MiB (mounted: root only), where output files fill the disk."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mount)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_cuts_the_output_and_the_model_is_told(full_disk: Path, tmp_path: Path) -> None:
    """A write error (ENOSPC) stops the copy like the cap does, and says so: the model must
    not take a cut output for the whole of it."""
    groups = ProcessGroups(output_cap=64 * CAP, scratch_root=full_disk)
    try:
        context = make_context(tmp_path, groups)
        out = TOOLS["Bash"].run({"command": "head -c 3000000 /dev/zero; echo after"}, context)
    finally:
        groups.kill_all()
    assert isinstance(out, ToolResult)
    assert "[output cut: it could not be kept (No space left on device after" in out.content
