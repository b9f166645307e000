"""A squatted home's fallback shared by every process of the user (session 29,
``scratch.shared_fallback``): each process's ``mkdtemp`` fallback was its own, so another
process's, made after a sandboxed command started, lay outside that command's cover (the
homes beside its own are covered as they are at its start). Where the user has a private
runtime directory (``$XDG_RUNTIME_DIR``, ``/run/user/<uid>``: no one else may make a name
there), every falling-back process takes one home in it, which the command's namespace
covers whole, those made after it started included. The squat is a real second uid's
(root only); the command runs under the real kernel sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from subagents.tools import sandbox_report
from subagents.tools.scratch import RUNTIME_HOME

from .conftest import WAIT
from .test_sandbox_runs import landlock
from .test_sandbox_scratch import namespaces
from .test_sandbox_scratch_squat import SECRET, _bash_result, as_root, shared, squat

__all__ = ["shared"]  # (the fixture, imported)

MAKER = """
import sys, tempfile
from subagents.tools.scratch import MCP_DIR, make_dir
tempfile.tempdir = sys.argv[1]
made = make_dir(MCP_DIR)
(made / "secret").write_text(sys.argv[2])
print(made, flush=True)
sys.stdin.read()  # (lives until the test closes its input)
"""


def _xdg(tmp_path: Path, mode: int = 0o700) -> Path:
    made = tmp_path / "xdg"
    made.mkdir(mode=mode)
    made.chmod(mode)
    return made


def _another(shared: Path, xdg: Path) -> tuple[subprocess.Popen[str], Path]:
    """Another live process of the user and the MCP directory it made (holding ``SECRET``):
    it lives until its input is closed."""
    other = subprocess.Popen(
        [sys.executable, "-c", MAKER, str(shared), SECRET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "XDG_RUNTIME_DIR": str(xdg)},
    )
    assert other.stdout is not None
    return other, Path(other.stdout.readline().strip())


def _ended(other: subprocess.Popen[str]) -> None:
    other.communicate(timeout=120)
    assert other.returncode == 0


def _made_by_another(shared: Path, xdg: Path) -> Path:
    """The MCP directory another process of the user made (it has ended)."""
    other, made = _another(shared, xdg)
    _ended(other)
    return made


@as_root
def test_every_process_falls_back_to_the_one_home_in_the_private_runtime_directory(
    shared: Path, tmp_path: Path
) -> None:
    """Two processes, one home (kept at their exit: it is shared); a runtime directory that
    is not private (0755) gives a ``mkdtemp`` home of the process's own, as before."""
    squat(shared, "directory")
    xdg = _xdg(tmp_path)
    first, second = _made_by_another(shared, xdg), _made_by_another(shared, xdg)
    assert first.parent == second.parent == xdg / RUNTIME_HOME
    assert (second / "secret").read_text() == SECRET  # (the home is kept: it is shared)
    assert not first.exists()  # (its maker gone, swept by the second: ``held_dirs``)
    assert (xdg / RUNTIME_HOME).stat().st_mode & 0o777 == 0o700
    (tmp_path / "open").mkdir()
    open_xdg = _xdg(tmp_path / "open", 0o755)
    own = _made_by_another(shared, open_xdg)
    assert own.parent.parent == shared and not (open_xdg / RUNTIME_HOME).exists()


@as_root
@landlock
@namespaces
def test_a_home_made_by_another_process_after_a_command_started_is_covered(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The victim's command starts, then another process of the victim's falls back too and
    keeps a secret in its MCP directory: the command reads nothing of it (with a home of
    each process's own, it read it: the other home was made after the command started)."""
    squat(shared, "directory")
    xdg = _xdg(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    monkeypatch.setattr("tempfile.tempdir", str(shared))
    work = tmp_path / "work"
    work.mkdir()
    look = (
        "touch started; while [ ! -e go ]; do sleep 0.05; done;"
        f" cat {shared}/*/*/secret {xdg}/*/*/secret; ls -a {xdg}/{RUNTIME_HOME}; echo looked"
    )
    found: list[Any] = []
    command = threading.Thread(target=lambda: found.append(_bash_result(work, look)))
    command.start()
    try:
        for _ in range(int(WAIT / 0.05)):
            if (work / "started").exists() or not command.is_alive():
                break
            threading.Event().wait(0.05)
        assert (work / "started").exists(), "the command never started"
        live, other = _another(shared, xdg)
        try:
            (work / "go").touch()
            command.join(WAIT)
            assert (other / "secret").read_text() == SECRET  # (there while it looked)
        finally:
            _ended(live)
    finally:
        (work / "go").touch()
        command.join(WAIT)
    (looked,) = found
    assert "looked" in looked.content and SECRET not in looked.content, looked.content
    assert other.name not in looked.content, looked.content


@as_root
def test_doctor_says_the_squat_and_that_the_shared_fallback_holds(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ok``, naming the squat: every process's scratch is under one cover."""
    squatted = squat(shared, "directory")
    xdg = _xdg(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    monkeypatch.setattr("tempfile.tempdir", str(shared))
    machine = sandbox_report.found()
    assert (machine.squatted, machine.home, machine.shared) == (
        str(squatted),
        str(xdg / RUNTIME_HOME),
        True,
    )
    (scratch,) = [c for c in sandbox_report.checks(machine) if c.name == "scratch"]
    assert scratch.state == "ok" and str(squatted) in scratch.says, scratch
