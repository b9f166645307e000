"""A hard link is a second name of a file outside: whatever writes the name writes the file.
The file tools run in the runtime's own process, outside the sandbox, and check the path
they are given, not how many names its file has: a run that could link a file from outside
into its workspace would then have a tool change it there. Landlock refuses the link (a
file may not be reparented from a directory without ``REFER``: ``Invalid cross-device
link``), and the rename, in every mode; and Write replaces a file by a new one (a rename),
never writing through a second name (session 26, e-adv26: the attack held; this guards it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

from .conftest import WAIT
from .test_sandbox_runs import TRUSTING_BASH, agent, landlock, results, use


@landlock
@pytest.mark.parametrize("mode", ["plan", "bypassPermissions"])
def test_a_run_cannot_link_a_file_from_outside_for_write_to_change(
    repo: Path, tmp_path: Path, mode: str
) -> None:
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    victim.write_text("keep me\n")
    links = f'ln {victim} hl; ln {victim} "$TMPDIR/hl"; ln -P {victim} sub-hl; mv {victim} moved'
    model = ScriptedModel(
        {
            "worker": [
                {"tool_calls": [use("Bash", command=links)]},
                {"tool_calls": [use("Write", file_path="hl", content="pwned\n")]},
                "done",
            ]
        }
    )
    with Runtime(  # a Bash that calls every line read-only: the kernel must hold
        [agent("worker")], model=model, workspace=repo, permissions=mode, tools=[TRUSTING_BASH]
    ) as rt:
        assert rt.run("worker", "link", wait=WAIT).status is RunStatus.COMPLETED
    linked, written = results(model, "worker")
    assert linked.content.count("failed to create hard link") == 3, linked
    assert "Invalid cross-device link" in linked.content  # into TMPDIR, writable in every mode
    assert "cannot move" in linked.content and not (repo / "moved").exists()
    assert victim.read_text() == "keep me\n" and victim.stat().st_nlink == 1
    if mode == "plan":
        assert written.is_error and not (repo / "hl").exists()
    else:  # Write made a file of its own: the name was never the victim's
        assert (repo / "hl").read_text() == "pwned\n" and (repo / "hl").stat().st_nlink == 1
