"""``benchmarks/durable_statement.py`` counts the sender's statement per durable mail as the
difference of two replays under callgrind. Here, without valgrind (its runs answered by the
test): the replays' order and environment. Figures never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from subagents.store.sqlite import SQLiteStore

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _module() -> Any:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import durable_statement
    finally:
        sys.path.remove(str(BENCHMARKS))
    return durable_statement


def test_both_counted_replays_read_bytecode_a_native_replay_wrote_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where bytecode is written, the first counted replay (the long one) compiled the
    package and wrote it for the short one: ~1.9G instructions of compiling counted as the
    statements' (1,890,230 per statement where the bare INSERT read 84,505). So a native
    replay runs first, bytecode written, and no counted one compiles. Seen failing before
    (the first run was the counted long one, with ``PYTHONDONTWRITEBYTECODE`` passed on)."""
    statement = _module()
    with SQLiteStore(tmp_path / "snapshot.db"):
        pass
    insert = statement._INSERT_MAIL
    kept = [(insert, [f"m{i}", "a", "b", "delivered", 1.0, "{}"]) for i in range(12)]
    (tmp_path / "statements.json").write_bytes(msgspec.json.encode(kept))
    seen: list[tuple[list[str], dict[str, str]]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append((command, kwargs["env"]))
        count = int(command[-1])
        refs = 1_000_000 + 300 * count  # the start, then 300 per statement
        return subprocess.CompletedProcess(command, 0, "", f"==1== Collected : {refs}\n")

    monkeypatch.setattr(statement.subprocess, "run", run)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    figures = statement.measure(tmp_path, 12, True)
    assert figures["instructions_per_statement"] == {"store": 300, "bare": 300}
    assert seen[0][0][0] != "valgrind"  # compiles natively, first
    assert [command[0] for command, _ in seen[1:]] == ["valgrind"] * 4
    assert not any("PYTHONDONTWRITEBYTECODE" in env for _, env in seen)
    assert {env["PYTHONHASHSEED"] for _, env in seen} == {"0"}
