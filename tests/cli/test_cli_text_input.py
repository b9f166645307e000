"""`run`'s TASK and `send`'s TEXT must be UTF-8 text, from stdin (``-``) or the command line:
anything else is a usage error naming the byte, not a traceback from deep in the store."""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec
import pytest
from clikit import Cli

LATIN1 = "caf\xe9 cr\xe8me".encode("latin-1")  # 0xe9 at offset 3: not UTF-8


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _run(cli: Cli, *args: str | bytes, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """Bytes in and out (in this process for the commands that only read the store)."""
    return cli.raw(*args, stdin=stdin)


def test_a_task_from_stdin_that_is_not_utf8_is_a_usage_error(cli: Cli) -> None:
    proc = _run(cli, "run", "quick", "-", "--agents", str(cli.agents), stdin=b"x\n" + LATIN1)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "TASK read from stdin is not UTF-8 text: byte 0xe9 at offset 5 (line 2)" in err
    assert "Traceback" not in err
    assert cli.runs() == []  # nothing was started


def test_a_task_argument_that_is_not_utf8_is_a_usage_error(cli: Cli) -> None:
    proc = _run(cli, "run", "quick", LATIN1, "--agents", str(cli.agents))
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "TASK is not UTF-8 text: byte 0xe9 at character 3" in err
    assert "Traceback" not in err


def test_mail_text_from_stdin_that_is_not_utf8_is_a_usage_error(cli: Cli) -> None:
    proc = _run(cli, "send", "r1", "-", stdin=LATIN1)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "TEXT read from stdin is not UTF-8 text: byte 0xe9 at offset 3" in err


@pytest.mark.parametrize(
    "command",
    [
        ["info"],
        ["log"],
        ["tree"],
        ["events", "--run"],
        ["ps", "--root"],
        ["stop"],
        ["stop", "--requester"],
        ["wait"],
        ["attach"],
        ["send"],
        ["continue"],
        ["approvals"],
    ],
)
def test_a_run_that_is_not_utf8_is_a_usage_error(cli: Cli, command: list[str]) -> None:
    """A RUN in another encoding (argv's bad bytes, lone surrogates) names no run: a usage
    error naming the byte (the store's look-up raised a UnicodeEncodeError traceback)."""
    assert _run(cli, "run", "quick", "hi", "--agents", str(cli.agents)).returncode == 0
    extra = ["hi"] if command[0] in ("send", "continue") else []
    proc = _run(cli, *command, LATIN1, *extra)
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "RUN is not UTF-8 text: byte 0xe9 at character 3" in err, err
    assert "Traceback" not in err


def test_a_utf8_task_from_stdin_is_taken_exactly(cli: Cli) -> None:
    task = "caf\xe9\r\ncr\xe8me"
    proc = _run(
        cli, "run", "quick", "-", "--agents", str(cli.agents), "--json", stdin=task.encode()
    )
    assert proc.returncode == 0, proc.stderr.decode()
    outcome = msgspec.json.decode(proc.stdout)["outcome"]
    assert outcome["result"] == f"quick answer to {task}"
