"""An outsider's attack on approvals and the tool journal together: a call approved from
another process (`subagents approve`) starts, and its host is killed with SIGKILL while the
command runs. `subagents resume` on the same store asks again under the same id, finds the
answer, and must not run the approved command a second time: the journal knows it started,
so the model is told its effects are unknown. The killed host's command is killed by its
launcher once that death is seen. On a SQLite file and on a PostgreSQL database.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))  # clikit

from clikit import DEADLINE_S, Cli, finish
from waiting_host import command_pid, gone

from ns_pids import GONE, NS
from polling import wait_until

SLOW_WRITER = f"""---
name: writer
description: Appends a line to out.txt with Bash, then waits, then says what it got.
tools: Bash
script:
  - text: "writing"
    tool_calls:
      - name: Bash
        input: {{command: "echo line >> out.txt; echo $$ {NS} > pid; sleep 60"}}
  - text: "writer got: {{result0}}"
---
You write.
"""

QUICK_WRITER = """---
name: quick
description: Appends a line to out.txt with Bash, then says what it got.
tools: Bash
script:
  - tool_calls:
      - name: Bash
        input: {command: "echo line >> out.txt; echo ran"}
  - text: "quick got: {result0}"
---
You write.
"""


@pytest.fixture(params=["sqlite", "postgres"])
def cli(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cli]:
    database = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    given = Cli(tmp_path, database=database)
    (given.agents / "writer.md").write_text(SLOW_WRITER, encoding="utf-8")
    (given.agents / "quick.md").write_text(QUICK_WRITER, encoding="utf-8")
    hosts: list[int] = []
    given.hosts = hosts  # type: ignore[attr-defined]
    yield given
    for pid in hosts:
        if pid > 0 and not gone(pid):
            os.kill(pid, signal.SIGKILL)
    command = command_pid(given)
    if command is not None and command != GONE and not gone(command):
        os.killpg(command, signal.SIGKILL)  # (its own process group, checked > 0 above)


def _asked(cli: Cli, run_id: str) -> str:
    found: list[str] = []

    def pending() -> bool:
        with cli.store() as store:
            found[:] = [a.approval_id for a in store.list_approvals() if a.run_id == run_id]
        return bool(found)

    wait_until(pending, f"an approval asked by {run_id}", DEADLINE_S, pace=0.05)
    return found[0]


def _detach(cli: Cli, agent: str) -> tuple[str, int]:
    proc = cli("run", "--detach", agent, "go", "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    run_id, host = data["run_id"], data["pid"]
    assert isinstance(host, int) and host > 0
    cli.hosts.append(host)  # type: ignore[attr-defined]
    return run_id, host


def test_an_approved_call_killed_mid_way_is_not_run_again_after_resume(cli: Cli) -> None:
    run_id, host = _detach(cli, "writer")
    approval_id = _asked(cli, run_id)
    approved = cli("approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    wait_until(lambda: command_pid(cli) is not None, "the approved command started", DEADLINE_S)
    command = command_pid(cli)
    assert command is not None and command != GONE

    os.kill(host, signal.SIGKILL)  # mid call: its journal entry written, its result not
    wait_until(lambda: gone(host), "the host gone", DEADLINE_S, pace=0.02)
    # the promise of docs/tools.md: the launcher kills a dead runtime's command
    wait_until(lambda: gone(command), "the killed host's command killed", DEADLINE_S)

    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    code, out, err = finish(resumed)
    assert code == 0, err
    said = msgspec.json.decode(out)
    assert run_id in said.get("resumed", []), out + err
    assert (cli.root / "out.txt").read_text() == "line\n"  # once: not run again
    with cli.store() as store:
        record = store.get_run(run_id)
        kinds = [e.kind for e in store.events(run_id)]
        (approval,) = store.list_approvals(pending=False)
    assert record is not None and record.outcome is not None
    assert record.status == "completed"
    assert record.outcome.result is not None
    assert record.outcome.result.startswith("writer got: This Bash call was interrupted")
    # the resumed run read the journal's start first: not asked again, the answer taken once
    assert kinds.count("approval_asked") == 1 and kinds.count("approval_answered") == 1
    assert kinds.count("started") == 2
    assert approval.approval_id == approval_id and approval.status == "allowed"


def test_an_answer_its_host_never_took_is_taken_once_after_a_crash(cli: Cli) -> None:
    """The answer is posted (with its command for the host) while the host is stopped, so
    it never claims it; the host is then killed. The resumed run takes the answer once
    (the command the dead host left and the answer read again are one answer) and runs
    the call once."""
    run_id, host = _detach(cli, "quick")
    approval_id = _asked(cli, run_id)
    os.kill(host, signal.SIGSTOP)
    try:
        approved = cli("approve", approval_id)
        assert approved.returncode == 0, approved.stderr
    finally:
        os.kill(host, signal.SIGKILL)  # (a stopped process dies of SIGKILL too)
    wait_until(lambda: gone(host), "the host gone", DEADLINE_S, pace=0.02)
    assert not (cli.root / "out.txt").exists()  # not run by the stopped host

    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    code, out, err = finish(resumed)
    assert code == 0, err
    assert run_id in msgspec.json.decode(out).get("resumed", []), out + err
    assert (cli.root / "out.txt").read_text() == "line\n"  # once
    with cli.store() as store:
        record = store.get_run(run_id)
        kinds = [e.kind for e in store.events(run_id)]
    assert record is not None and record.outcome is not None, record
    assert (record.status, record.outcome.result) == ("completed", "quick got: ran"), record
    assert kinds.count("approval_answered") == 1


def test_a_call_cut_by_a_crash_reads_as_unknown_in_a_continuation_not_as_never_run(
    cli: Cli,
) -> None:
    """The host dies mid call; the orphaned run is stopped, not resumed, and then continued:
    the continued conversation must not tell the model the call was not run (it ran: the
    line is written), but that its effects are unknown, as a resume would. Before: `not run:
    the run ended before this call finished`, and a model believing it would run it again."""
    run_id, host = _detach(cli, "writer")
    approved = cli("approve", _asked(cli, run_id))
    assert approved.returncode == 0, approved.stderr
    wait_until(lambda: command_pid(cli) is not None, "the approved command started", DEADLINE_S)
    command = command_pid(cli)
    assert command is not None and command != GONE
    os.kill(host, signal.SIGKILL)
    wait_until(lambda: gone(host), "the host gone", DEADLINE_S, pace=0.02)
    wait_until(lambda: gone(command), "the killed host's command killed", DEADLINE_S)
    stopped = cli("stop", run_id)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr

    continued = cli("continue", run_id, "go on", "--agents", str(cli.agents), "--json")
    assert continued.returncode == 0, continued.stderr
    said = msgspec.json.decode(continued.stdout)["outcome"]["result"]
    assert (cli.root / "out.txt").read_text() == "line\n"  # it ran, once
    assert said.startswith("writer got: This Bash call was interrupted"), said
    assert "effects are unknown" in said and "not run: " not in said, said


def test_two_resumes_at_once_take_the_run_once_and_run_the_approved_call_once(
    cli: Cli,
) -> None:
    """The host dies with an ask pending; it is answered while no host runs (the call never
    started: whoever takes the run up runs it); two `subagents resume` start at once. The
    store's restore is one transaction that re-stamps the runs (docs/store.md): one takes
    the run, the other finds nothing, and the call runs once.

    A race, not a guard of that transaction: whether the two restores overlap depends on
    the two processes' start-up. Reviewed (r-adv27, load ~26): with the snapshot read
    outside the restore's transaction (``actors/supervisor.py`` ``_restored``) it passed 3
    runs of 3 (SQLite twice, PostgreSQL once); the engineer saw it fail only with the window
    widened by hand. It checks the outcome when they do overlap; a deterministic guard needs
    the first restore held between its read and its commit (not written yet)."""
    run_id, host = _detach(cli, "quick")
    approval_id = _asked(cli, run_id)
    os.kill(host, signal.SIGKILL)
    wait_until(lambda: gone(host), "the host gone", DEADLINE_S, pace=0.02)
    approved = cli("approve", approval_id)
    assert approved.returncode == 0, approved.stderr

    both = [cli.start("resume", "--agents", str(cli.agents), "--json") for _ in range(2)]
    ended = [finish(p) for p in both]
    took = []
    for code, out, err in ended:
        said = msgspec.json.decode(out) if out.strip() else {}
        if run_id in said.get("resumed", []):
            assert code == 0, err
            took.append(run_id)
    assert len(took) == 1, ended  # one took it, the other found it taken
    assert (cli.root / "out.txt").read_text() == "line\n"  # once
    with cli.store() as store:
        record = store.get_run(run_id)
        kinds = [e.kind for e in store.events(run_id)]
    assert record is not None and record.status == "completed", record
    assert kinds.count("completed") == 1 and kinds.count("approval_answered") == 1, kinds


HOOKED = f"""---
name: hooked
description: Appends a line to out.txt with Bash behind a PreToolUse hook.
tools: Bash
hooks:
  PreToolUse:
    - matcher: "Bash"
      hooks:
        - type: command
          command: "cat >/dev/null; if [ ! -e hooked ]; then touch hooked; echo $$ {NS} > pid; sleep 60; fi; echo '{{}}'"
script:
  - tool_calls:
      - name: Bash
        input: {{command: "echo line >> out.txt; echo ran"}}
  - text: "hooked got: {{result0}}"
---
You write.
"""  # noqa: E501


def test_an_approval_taken_then_a_crash_before_the_journal_runs_the_call_once(
    cli: Cli,
) -> None:
    """The host takes the answer, runs the call's PreToolUse hook (after the approval,
    before the journal: docs/tools.md) and is killed there: the call never started. The
    resumed run has the answer again (same approval id) and runs the call, once."""
    (cli.agents / "hooked.md").write_text(HOOKED, encoding="utf-8")
    proc = cli(
        "run", "--detach", "hooked", "go", "--agents", str(cli.agents), "--json",
        "--allow-hooks",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    run_id, host = data["run_id"], data["pid"]
    assert isinstance(host, int) and host > 0
    cli.hosts.append(host)  # type: ignore[attr-defined]
    assert cli("approve", _asked(cli, run_id)).returncode == 0
    wait_until(lambda: command_pid(cli) is not None, "the hook running", DEADLINE_S)
    hook = command_pid(cli)
    assert hook is not None and hook != GONE
    os.kill(host, signal.SIGKILL)
    wait_until(lambda: gone(host), "the host gone", DEADLINE_S, pace=0.02)
    wait_until(lambda: gone(hook), "the hook killed", DEADLINE_S)
    assert not (cli.root / "out.txt").exists()

    resumed = cli.start("resume", "--agents", str(cli.agents), "--json", "--allow-hooks")
    code, out, err = finish(resumed)
    assert code == 0, err
    assert run_id in msgspec.json.decode(out).get("resumed", []), out + err
    assert (cli.root / "out.txt").read_text() == "line\n"  # run once, by the resumed run
    with cli.store() as store:
        record = store.get_run(run_id)
    assert record is not None and record.outcome is not None, record
    assert (record.status, record.outcome.result) == ("completed", "hooked got: ran"), record
