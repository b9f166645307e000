"""``ns_pids.outer`` (tests/ns_pids.py) names a process only if it was running when its pid
was said: a PID namespace's number and a pid are both reused, and a cleanup that killed by a
stale mapping killed another test's fresh shell (the CI reds of sessions 30 and 31)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ns_pids import GONE, NS, outer, pid_in
from polling import wait_until


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process of ours in our own PID namespace."""
    proc = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _said(path: Path, text: str, at: float | None = None) -> Path:
    path.write_text(text)
    if at is not None:
        os.utime(path, (at, at))
    return path


def test_a_pid_said_while_its_process_ran_names_it(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    ns = os.readlink("/proc/self/ns/pid")
    assert pid_in(_said(tmp_path / "pid", f"{sleeper.pid} {ns}\n")) == sleeper.pid
    assert pid_in(_said(tmp_path / "bare", f"{sleeper.pid}\n")) == sleeper.pid
    assert outer(f"{sleeper.pid} {ns}", time.time()) == sleeper.pid
    assert outer(f"{sleeper.pid} {ns}") == sleeper.pid  # said with no time: not checked


def test_a_pid_said_before_its_holder_started_names_nobody(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """The number was another process's when it was said (a minute before this one
    started): the one holding it now is not what the file meant."""
    ns = os.readlink("/proc/self/ns/pid")
    before = time.time() - 60
    assert pid_in(_said(tmp_path / "pid", f"{sleeper.pid} {ns}\n", at=before)) == GONE
    assert pid_in(_said(tmp_path / "bare", f"{sleeper.pid}\n", at=before)) == GONE
    assert outer(f"{sleeper.pid} {ns}", before) == GONE


def _own_namespace_works() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run(
        [unshare, "--user", "--map-root-user", "--pid", "--fork", "true"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.skipif(
    not _own_namespace_works(), reason="unshare cannot make a user and PID namespace here"
)
def test_a_pid_in_a_namespace_is_checked_as_one_out_here(tmp_path: Path) -> None:
    """A shell in a PID namespace of its own says ``$$ NS`` (pid 1 in there): mapped to its
    pid out here while it runs, and to nobody when the saying predates it, which is what a
    namespace's number reused by a later command looks like."""
    said = tmp_path / "pid"
    shell = subprocess.Popen(
        [
            "unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child",
            "--mount-proc", "sh", "-c", f"echo $$ {NS} > {said}; exec sleep 300",
        ],
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    found = GONE
    try:
        wait_until(lambda: said.exists() and said.read_text().strip() != "", "the pid said")
        found = pid_in(said)
        assert said.read_text().split()[0] == "1"
        assert found not in (1, GONE) and found != shell.pid  # unshare's child, out here
        os.utime(said, (time.time() - 60,) * 2)
        assert pid_in(said) == GONE
    finally:
        if found != GONE:  # the namespace's init: its end ends the namespace
            os.kill(found, signal.SIGKILL)
        shell.kill()
        shell.wait()
