"""`subagents run` with tools: --workspace, --permission-mode, --allow/--deny rules, and
approvals: the person at a terminal answers, a pipe denies."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from clikit import DEADLINE_S, Cli

EDITOR = """---
name: editor
description: Reads a file, edits it, and runs a command.
script:
  - tool_calls:
      - name: Read
        input: {file_path: notes.txt}
  - tool_calls:
      - name: Edit
        input: {file_path: notes.txt, old_string: draft, new_string: final}
  - tool_calls:
      - name: Bash
        input: {command: "echo ran > ran.txt && cat notes.txt"}
  - text: "edit: {results}"
---
You edit.
"""


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    made = Cli(tmp_path)
    (made.agents / "editor.md").write_text(EDITOR, encoding="utf-8")
    return made


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("a draft\n")
    return folder


def run_editor(cli: Cli, work: Path, *extra: str) -> dict[str, object]:
    proc = cli("run", "editor", "go", "--agents", str(cli.agents), "--workspace", str(work),
               "--json", *extra)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    outcome: dict[str, object] = msgspec.json.decode(proc.stdout)["outcome"]
    return outcome


def test_workspace_and_permission_options(cli: Cli, work: Path) -> None:
    outcome = run_editor(cli, work, "--permission-mode", "acceptEdits", "--allow", "Bash(echo:*)")
    assert (work / "notes.txt").read_text() == "a final\n"
    assert (work / "ran.txt").read_text() == "ran\n"
    assert "a final" in str(outcome["result"])


def test_on_a_pipe_an_ask_is_denied(cli: Cli, work: Path) -> None:
    outcome = run_editor(cli, work)  # default mode: the edit and the command would be asked
    assert (work / "notes.txt").read_text() == "a draft\n"
    assert not (work / "ran.txt").exists()
    assert "no approval handler" in str(outcome["result"])


def test_deny_rules_and_bad_rules(cli: Cli, work: Path) -> None:
    outcome = run_editor(cli, work, "--permission-mode", "bypassPermissions", "--deny", "Bash")
    assert (work / "notes.txt").read_text() == "a final\n"
    assert "denied by the rule Bash" in str(outcome["result"])
    proc = cli("run", "editor", "go", "--agents", str(cli.agents), "--allow", "Bash(")
    assert proc.returncode == 2
    assert "--allow: permission rule 'Bash(' is not of the form" in proc.stderr
    proc = cli("run", "editor", "go", "--agents", str(cli.agents), "--workspace", "/nope/x")
    assert proc.returncode == 2 and "--workspace /nope/x: not a directory" in proc.stderr


def test_at_a_terminal_the_person_is_asked(cli: Cli, work: Path) -> None:
    """Both ends on a pseudo-terminal: the edit is approved, the command refused."""
    args = ("run", "editor", "go", "--agents", str(cli.agents), "--workspace", str(work))
    answers = [b"y\n", b"n\n"]

    def reply(seen: bytes) -> bytes | None:
        due = answers and seen.count(b"Allow this call?") > 2 - len(answers)
        return answers.pop(0) if due else None

    code, text = _at_a_terminal(cli, args, reply)
    assert code == 0, text[-3000:]
    assert "approval needed" in text and "wants to call Edit" in text
    assert "Allow this call? [y/N]" in text  # the prompt is text: rich markup ate "[y/N]"
    assert (work / "notes.txt").read_text() == "a final\n"
    assert not (work / "ran.txt").exists()
    assert "the person at the terminal said no" in text


ASKER = """---
name: asker
description: Asks which store to use.
script:
  - tool_calls:
      - name: AskUserQuestion
        input:
          questions:
            - question: "Which store should the cache use?"
              header: Store
              options:
                - {label: SQLite, description: a file}
                - {label: Memory, description: lost on exit}
  - text: "asker: {result0}"
---
You ask.
"""


def test_at_a_terminal_the_person_answers_a_models_questions(cli: Cli, work: Path) -> None:
    (cli.agents / "asker.md").write_text(ASKER, encoding="utf-8")
    args = ("run", "asker", "go", "--agents", str(cli.agents), "--workspace", str(work))
    answered: list[bytes] = []

    def reply(seen: bytes) -> bytes | None:
        if answered or b"Your answer" not in seen:
            return None
        answered.append(b"SQLite please\n")
        return answered[0]

    code, text = _at_a_terminal(cli, args, reply)
    assert code == 0, text[-3000:]
    assert "Which store should the cache use?" in text and "- SQLite: a file" in text
    assert '"Which store should the cache use?"="SQLite please"' in " ".join(text.split())


def _at_a_terminal(
    cli: Cli, args: tuple[str, ...], reply: Callable[[bytes], bytes | None]
) -> tuple[int, str]:
    """The command with both ends on a pseudo-terminal, as a person runs it: what it printed
    is read as it comes, and ``reply(everything so far)`` may type an answer (bytes) each
    time; its exit code and all it printed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cli.argv(*args), stdin=slave, stdout=slave, stderr=slave,
        env={**cli.env, "TERM": "xterm-256color"}, cwd=cli.root,
    )  # fmt: skip
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + DEADLINE_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                seen += data
            typed = reply(seen)
            if typed is not None:
                os.write(master, typed)
            if proc.poll() is not None and not ready:
                break
        code = proc.wait(timeout=10)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, seen.decode("utf-8", "replace")
