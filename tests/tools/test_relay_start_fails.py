"""A command whose output relay cannot start (no thread to spare) is not left running."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from subagents.tools.processes import ProcessGroups


def test_a_command_whose_relay_cannot_start_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups = ProcessGroups()
    started: list[int] = []
    real_popen_init = __import__("subprocess").Popen.__init__

    def recording_init(self: object, *args: object, **kwargs: object) -> None:
        real_popen_init(self, *args, **kwargs)
        started.append(self.pid)  # type: ignore[attr-defined]

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr("subprocess.Popen.__init__", recording_init)
    monkeypatch.setattr(threading.Thread, "start", no_thread)
    try:
        with pytest.raises(RuntimeError, match="new thread"):
            groups.start("sleep 300", cwd=tmp_path, run_id="r")
    finally:
        monkeypatch.undo()
    assert len(started) == 1
    assert not Path(f"/proc/{started[0]}").exists()  # killed and reaped, not left running
    groups.kill_all()
