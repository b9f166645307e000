"""A clean screen: text from a task, a model or a mail never drives the terminal (every human
view escapes control characters, on a terminal and on a pipe; --json stays exact), log lines
go above the live view instead of into it, and pipes are never wrapped."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import Cli, by_agent, finish, on_terminal

EVIL = "x\x1b]0;PWNED\x07 \x1b[31mRED\x1b[0m \x9b2J \u202eevil \x08\x0d end"
"""A title change (OSC ... BEL), a colour, an 8-bit CSI, a right-to-left override, a
backspace and a carriage return: what a model or a task could send to drive a terminal."""

RAW = ("\x1b]0;", "\x07", "\x1b[31mRED", "\x9b", "\u202e", "\x08")
"""None of these may reach a human view (rich's own colour codes are not among them)."""

ESCAPED = "x\\x1b]0;PWNED\\x07 \\x1b[31mRED\\x1b[0m \\x9b2J \\u202eevil \\x08\\x0d end"


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


def _clean(text: str, where: str) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached {where}: {text[-1500:]!r}"


def _worker_waiting(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return by_agent(rows, "worker", "waiting")


def test_task_reply_and_mail_are_escaped_on_a_pipe_and_exact_in_json(cli: Cli) -> None:
    proc = cli.start("run", "lead", EVIL, "--agents", str(cli.agents))
    worker = cli.wait_runs(_worker_waiting, "the worker waiting for mail", proc)
    assert cli("send", worker["run_id"], EVIL).returncode == 0
    code, out, err = finish(proc)
    assert code == 0, err
    _clean(out, "run's stdout")
    _clean(err, "run's stderr")
    assert f"lead got: worker heard: {ESCAPED}" in out  # the result, escaped, readable

    lead = next(r for r in cli.runs() if r["agent"] == "lead")
    for args in (
        ("log", worker["run_id"]),
        ("log", lead["run_id"]),
        ("info", worker["run_id"]),
        ("info", lead["run_id"]),
        ("tree", lead["run_id"]),
        ("ps", "--all"),
    ):
        shown = cli(*args)
        assert shown.returncode == 0, shown.stderr
        _clean(shown.stdout + shown.stderr, " ".join(args))
        assert "\\x1b" in shown.stdout, args  # escaped, not dropped: the reader sees it was there

    # --json stays exact: JSON escapes control characters itself
    log = cli.json("log", worker["run_id"])
    mail = [e for e in log["entries"] if e["kind"] == "mail_in"]
    assert mail and mail[0]["text"].endswith(EVIL)
    assert cli.json("info", lead["run_id"])["run"]["task"] == EVIL


def test_task_and_reply_are_escaped_on_a_terminal(cli: Cli) -> None:
    code, shown = on_terminal(cli, "run", "quick", EVIL, "--agents", str(cli.agents))
    assert code == 0, shown
    _clean(shown, "run on a terminal")
    assert "quick answer to x\\x1b]0;PWNED" in shown
    run_id = cli.runs()[0]["run_id"]
    for args in (("log", run_id), ("info", run_id), ("tree", run_id), ("ps", "--all")):
        code, shown = on_terminal(cli, *args)
        assert code == 0, shown
        _clean(shown, f"{' '.join(args)} on a terminal")


def test_log_lines_go_above_the_live_view_not_into_it(cli: Cli) -> None:
    """The demo logs (at info) when a waiting run lends its slot to a queued run, while the
    live tree is drawn: the line must stand on a line of its own, the view erased before it."""
    code, shown = on_terminal(cli, "-v", "demo")
    assert code == 0, shown[-2000:]
    at = shown.index("a waiting run lent its slot to a queued run")
    line_start = shown.rfind("\n", 0, at) + 1
    before = shown[line_start:at]
    stamp = re.search(r"\d{4}-\d\d-\d\dT", before)
    assert stamp is not None, repr(before)
    segment = before[: stamp.start()]
    # whatever the live view had drawn on this line was erased (ESC [2K) before the log line
    tokens = [m.group() for m in re.finditer(r"\x1b\[[0-9;?]*[A-Za-z]|.", segment, re.DOTALL)]
    last_text = max(
        (i for i, t in enumerate(tokens) if len(t) == 1 and t.isprintable()), default=-1
    )
    last_erase = max((i for i, t in enumerate(tokens) if t == "\x1b[2K"), default=-1)
    assert last_text == -1 or last_erase > last_text, repr(segment[-300:])


def test_pipes_are_not_wrapped(cli: Cli) -> None:
    long_task = "a task long enough to pass eighty columns " * 4
    proc = cli(
        "run", "quick", long_task.strip(), "--agents", str(cli.agents), env={"COLUMNS": "80"}
    )
    assert proc.returncode == 0, proc.stderr
    assert f"quick answer to {long_task.strip()}" in proc.stdout.splitlines()
    tree = cli("tree", cli.runs()[0]["run_id"], env={"COLUMNS": "80"})
    assert any(len(line) > 80 for line in tree.stdout.splitlines()), tree.stdout


def test_the_last_listing_is_private(cli: Cli) -> None:
    assert cli("run", "quick", "x", "--agents", str(cli.agents)).returncode == 0
    assert cli("ps", "--all").returncode == 0
    listing = cli.state.parent / "last-ps.json"
    assert listing.stat().st_mode & 0o777 == 0o600
    assert msgspec.json.decode(listing.read_bytes())["run_ids"]


def test_bidi_marks_and_line_separators_are_shown_as_escapes() -> None:
    """The Arabic letter mark and U+2028/U+2029 (a line break to some terminals) are not
    sent raw either (a store's host name or an agent's reply may carry them)."""
    from subagents.cli.output import printable

    assert printable("a\u061cb\u2028c\u2029d") == "a\\u061cb\\u2028c\\u2029d"
