"""A run's commands see no other run's files in the runtime's scratch directory (session 26,
e-scratch): every run's ``TMPDIR`` is a directory of it, where its commands' output files
and whatever they write there lie; e-adv26's ``plan`` run read a sibling's background shell
output through ``$TMPDIR/../run-*/``. In the command's own mount namespace the scratch
directory is now an empty tmpfs with only the run's own directory bound back
(``sandbox_shm.keep_own``), so reads, which the sandbox does not restrict by default, find
nothing of the others. Through the real runtime and kernel."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.tools import sandbox_exec
from subagents.tools.permissions import Permissions
from subagents.tools.sandbox import LAUNCHER, private_shm_refusal

from .conftest import WAIT
from .test_sandbox_runs import TRUSTING_BASH, agent, landlock, results, use

namespaces = pytest.mark.skipif(
    private_shm_refusal() is not None, reason="no mount namespace for sandboxed commands here"
)
SECRET = "the-leads-secret-4c1d"
LOOK = (  # (its own directory holds this command's output file: not read into itself)
    'ls -a "$TMPDIR/.."; for d in "$TMPDIR"/../run-*; do [ "$d" -ef "$TMPDIR" ] || cat "$d"/*; done'
)


@landlock
@namespaces
@pytest.mark.parametrize("mode", ["plan", "default"])
def test_a_run_reads_none_of_another_runs_scratch_files_and_keeps_its_own(
    repo: Path, mode: str
) -> None:
    """The lead writes a secret in its ``TMPDIR`` and starts a background shell (its output
    file lies there too), then spawns a reader (``plan``, or ``default`` like itself) that
    looks through ``$TMPDIR/..``: it finds its own directory alone; it writes and reads its
    own files, and so does the lead after it."""
    lead = [
        {"tool_calls": [use("Bash", command=f'echo {SECRET} > "$TMPDIR/mine.txt"')]},
        {"tool_calls": [use("Bash", command=f"echo {SECRET}-shell", run_in_background=True)]},
        {"tool_calls": [use("spawn_subagent", agent="reader", task="look")]},
        {"tool_calls": [use("Bash", command='cat "$TMPDIR/mine.txt"')]},
        "done",
    ]
    reader = [
        {"tool_calls": [use("Bash", command=LOOK)]},
        {"tool_calls": [use("Bash", command='echo own > "$TMPDIR/own" && cat "$TMPDIR/own"')]},
        "read",
    ]
    model = ScriptedModel({"lead": lead, "reader": reader})
    agents = [agent("lead"), agent("reader", permission_mode=mode)]
    permissions = Permissions(mode="default", allow=("Bash",))
    with Runtime(
        agents, model=model, workspace=repo, permissions=permissions, tools=[TRUSTING_BASH]
    ) as rt:
        assert rt.run("lead", "go", wait=WAIT).status is RunStatus.COMPLETED
    looked, own = results(model, "reader")
    assert SECRET not in looked.content, looked
    listed = [line for line in looked.content.splitlines() if line.startswith("run-")]
    assert len(listed) == 1, looked  # its own directory alone
    assert (own.content, own.is_error) == ("own", False)
    *_, mine = results(model, "lead")
    assert mine.content == SECRET


@landlock
@namespaces
def test_the_launcher_refuses_a_run_directory_outside_the_scratch_one(tmp_path: Path) -> None:
    """``--own-scratch`` names the directory whose one descendant (the last ``--write``) the
    command keeps: anything else is a mistake said, and nothing runs (no cover over a
    directory the caller did not mean)."""
    scratch, elsewhere = tmp_path / "scratch", tmp_path / "elsewhere"
    (scratch / "run-a").mkdir(parents=True)
    (scratch / "run-b").mkdir()
    elsewhere.mkdir()
    head = [sys.executable, "-I", "-S", LAUNCHER, "--private-shm", "--own-scratch", str(scratch)]
    ran = subprocess.run(
        [*head, "--write", str(elsewhere), "--", "touch", str(elsewhere / "ran")],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert ran.returncode == sandbox_exec.FAILED_EXIT, ran
    assert f"{elsewhere} is not a directory in {scratch}" in ran.stderr
    assert not (elsewhere / "ran").exists()
    kept = subprocess.run(
        [*head, "--write", str(scratch / "run-a"), "--", "sh", "-c", f"ls -a {scratch}"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert kept.stdout.split() == [".", "..", "run-a"], kept


BOUND_TWICE = """
import os, subprocess, sys
real, alias, link, launcher = sys.argv[1:]
subprocess.run(["mount", "--bind", real, alias], check=True)
scratch = os.path.join(link, "subagents-shells-x")  # reached through a symlink
for run in ("run-a", "run-b"):
    os.makedirs(os.path.join(scratch, run))
with open(os.path.join(scratch, "run-b", "out"), "w") as out:
    out.write("the-other-runs-output")
look = f"ls {alias}/subagents-shells-x; cat {alias}/subagents-shells-x/run-b/out"
argv = [sys.executable, "-I", "-S", launcher, "--private-shm", "--own-scratch", scratch]
argv += ["--write", os.path.join(scratch, "run-a"), "--", "sh", "-c", look]
done = subprocess.run(argv, capture_output=True, text=True)
print(done.stdout)  # (its stderr names run-b: the cat that failed)
"""


@landlock
@namespaces
def test_the_scratch_directory_reached_through_a_symlink_is_covered_at_its_other_names(
    tmp_path: Path,
) -> None:
    """A ``TMPDIR`` that is a symlink names the scratch directory by a path the mount table
    does not hold: its other names (a bind mount of a directory above it) must be found
    from the resolved path, or the other runs' files are read there (review, session 26)."""
    real, alias = tmp_path / "real", tmp_path / "alias"
    real.mkdir()
    alias.mkdir()
    (tmp_path / "link").symlink_to(real)
    argv = ["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c", BOUND_TWICE]
    try:
        done = subprocess.run(
            [*argv, str(real), str(alias), str(tmp_path / "link"), LAUNCHER],
            capture_output=True, text=True, timeout=WAIT, check=False,
        )  # fmt: skip
    except FileNotFoundError:
        pytest.skip("no unshare(1) here")
    if done.returncode != 0 and "mount" in done.stderr:
        pytest.skip(f"no mount namespace of our own here: {done.stderr.strip()[-200:]}")
    assert done.returncode == 0, done.stderr
    assert "the-other-runs-output" not in done.stdout, done.stdout
    assert "run-b" not in done.stdout, done.stdout


@landlock
@namespaces
def test_another_processes_view_of_the_scratch_directory_is_out_of_reach(tmp_path: Path) -> None:
    """The cover is in the command's namespace only: the runtime (here, the launcher's
    parent) and other runs' processes still show the whole scratch directory through
    ``/proc/<pid>/root`` and ``/proc/<pid>/cwd``. The ptrace check ``/proc`` makes there
    refuses the command, even without a PID namespace of its own (review, session 26): three
    guards, each enough alone (Landlock's domain scope; a user namespace of the command's
    own; as root, its dropped capabilities), so no one of them removed makes this fail."""
    scratch = tmp_path / "subagents-shells-x"
    for run in ("run-a", "run-b"):
        (scratch / run).mkdir(parents=True)
    (scratch / "run-b" / "out").write_text("the-other-runs-output")
    look = f"cat /proc/$PPID/root{scratch}/run-b/out /proc/$PPID/cwd/out"
    argv = [sys.executable, "-I", "-S", LAUNCHER, "--private-shm", "--own-scratch", str(scratch)]
    argv += ["--write", str(scratch / "run-a"), "--", "sh", "-c", look]
    parent = f"{shlex.join(argv)}; true"  # (not exec'd: the command's parent, in run-b)
    done = subprocess.run(
        ["sh", "-c", parent], cwd=scratch / "run-b",
        capture_output=True, text=True, timeout=WAIT, check=False,
    )  # fmt: skip
    assert "the-other-runs-output" not in done.stdout, done
    assert done.stderr.count("Permission denied") == 2, done
