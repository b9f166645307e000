"""Durable approvals across real processes: a `run --detach` tree's asks wait in the store,
`subagents approvals` lists them and `approve`/`deny` answer them from another process; a
SIGKILL of the host while an ask is pending loses nothing: after `subagents resume` the ask is
still pending (or answered, if someone answered it meanwhile), and an approved call runs once.
On a SQLite file and on a PostgreSQL database.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from clikit import DEADLINE_S, Cli, by_agent, finish

from polling import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: fake_messages_api

from fake_messages_api import FakeMessagesAPI, text_message

WRITER = """---
name: writer
description: Appends a line to out.txt with Bash, then says what it got.
tools: Bash
script:
  - text: "writing"
    tool_calls:
      - name: Bash
        input: {command: "echo line >> out.txt"}
  - text: "writer got: {result0}"
---
You write.
"""


ASKER = """---
name: asker
description: Asks which store to use, then says what it was told.
tools: AskUserQuestion
script:
  - tool_calls:
      - name: AskUserQuestion
        input:
          questions:
            - question: "Which store should the cache use?"
              header: "Store"
              options: [{label: SQLite}, {label: Memory}]
  - text: "asker heard: {result0}"
---
You ask.
"""


@pytest.fixture(params=["sqlite", "postgres"])
def cli(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cli]:
    """The command with the writer in its team, on a SQLite file or a PostgreSQL database
    (``$SUBAGENTS_STATE``); afterwards no host of this test is left."""
    database = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    yield from _hosting(Cli(tmp_path, database=database), writer=WRITER, asker=ASKER)


def _hosting(cli: Cli, **team: str) -> Iterator[Cli]:
    """``cli`` with ``team``'s agents written, its hosts kept (``cli.hosts``) and killed
    after the test if still alive."""
    for name, text in team.items():
        (cli.agents / f"{name}.md").write_text(text, encoding="utf-8")
    hosts: list[int] = []
    cli.hosts = hosts  # type: ignore[attr-defined]
    yield cli
    for pid in hosts:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _detach_writer(cli: Cli, agent: str = "writer") -> tuple[str, int]:
    proc = cli("run", "--detach", agent, "go", "--agents", str(cli.agents), "--json")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    cli.hosts.append(data["pid"])  # type: ignore[attr-defined]
    return data["run_id"], data["pid"]


def _pending(cli: Cli) -> list[dict[str, Any]]:
    """What `subagents approvals --json` prints."""
    rows: list[dict[str, Any]] = cli.json("approvals")
    return rows


def _asked(cli: Cli, run_id: str) -> str:
    """The id of the run's pending approval, once the store has it (read in this process:
    a command per poll would take the CPU the host needs)."""
    found: list[str] = []

    def pending() -> bool:
        with cli.store() as store:
            found[:] = [a.approval_id for a in store.list_approvals() if a.run_id == run_id]
        return bool(found)

    wait_until(pending, f"an approval asked by {run_id}", DEADLINE_S, pace=0.05)
    return found[0]


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: _gone(pid), f"the host {pid} gone", DEADLINE_S, pace=0.02)


def test_a_detached_ask_is_listed_and_answered_from_another_process(cli: Cli) -> None:
    run_id, pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    (row,) = _pending(cli)
    assert row["id"] == approval_id and row["run_id"] == run_id
    assert (row["agent"], row["tool"]) == ("writer", "Bash")
    assert row["input"] == {"command": "echo line >> out.txt"}
    assert "Bash needs approval" in row["reason"] and row["asked_at"] > 0
    assert row["orphaned"] is False and row["requester"] == "external"
    shown = cli("approvals")
    assert shown.returncode == 0 and approval_id in shown.stdout and "Bash" in shown.stdout
    assert not (cli.root / "out.txt").exists()  # nothing runs before an answer

    approved = cli("approve", approval_id[:8], "--reason", "fine", "--remember", "Bash(echo:*)")
    assert approved.returncode == 0, approved.stderr  # (a unique prefix of the id works)
    assert f"allowed {approval_id}" in approved.stdout
    assert "remembered Bash(echo:*) for its tree" in approved.stdout
    waited = cli("wait", run_id)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (cli.root / "out.txt").read_text() == "line\n"
    assert _pending(cli) == []
    (answered,) = cli.json("approvals", "--all")
    assert (answered["id"], answered["status"], answered["answer"]) == (
        approval_id,
        "allowed",
        "fine",
    )
    assert answered["remember"] == "Bash(echo:*)" and answered["answered_at"] > 0
    assert "allowed" in cli("approvals", "--all").stdout
    again = cli("deny", approval_id)
    assert again.returncode == 1 and "already answered: allowed" in again.stderr
    unknown = cli("approve", "ap-no-such")
    assert unknown.returncode == 1 and "no approval 'ap-no-such'" in unknown.stderr
    wait_until(lambda: _gone(pid), "the host gone", DEADLINE_S, pace=0.05)


def test_an_ask_answered_while_its_host_is_dead_is_acted_on_after_resume_once(cli: Cli) -> None:
    run_id, pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    _kill(pid)
    (row,) = _pending(cli)
    assert row["id"] == approval_id and row["orphaned"] is True
    approved = cli("approve", approval_id)
    assert approved.returncode == 0, approved.stderr
    assert "its host is gone" in approved.stdout and "subagents resume" in approved.stdout
    assert not (cli.root / "out.txt").exists()

    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    code, out, err = finish(resumed)
    assert code == 0, err
    assert run_id in msgspec.json.decode(out)["resumed"]
    record = next(r for r in cli.runs() if r["run_id"] == run_id)
    assert record["status"] == "completed"
    assert (cli.root / "out.txt").read_text() == "line\n"  # the approved call ran once
    with cli.store() as store:
        kinds = [e.kind for e in store.events(run_id)]
    assert kinds.count("approval_asked") == 2  # asked again by the resumed run, same id
    # taken once (announced when the run takes it; told again after the re-ask: ignored)
    assert kinds.count("approval_answered") == 1
    listed = cli("approvals", "--all", "--json")
    assert [r["status"] for r in msgspec.json.decode(listed.stdout)] == ["allowed"]  # not void


def test_two_people_answering_at_once_from_two_processes_one_wins(cli: Cli) -> None:
    run_id, _pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    answering = [cli.start(verb, approval_id) for verb in ("approve", "deny", "approve")]
    results = [finish(p) for p in answering]
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, 1, 1], results
    for code, _out, err in results:
        assert code == 0 or "was already answered" in err, err
    (answered,) = cli.json("approvals", "--all")
    assert cli("wait", run_id).returncode == 0
    ran = (cli.root / "out.txt").read_text() if (cli.root / "out.txt").exists() else ""
    assert ran == ("line\n" if answered["status"] == "allowed" else "")  # once, or never


def test_an_ask_answered_while_its_host_is_stalled_runs_once_under_the_resuming_host(
    cli: Cli,
) -> None:
    """The host is stopped (SIGSTOP) past its lease with an ask pending; the ask is answered;
    `resume` takes the run up and the call runs there; the stalled host, let go on, finds
    itself fenced and writes nothing: the call ran once and the run ended once."""
    proc = cli(
        "run", "--detach", "writer", "go", "--agents", str(cli.agents), "--json",
        env={"SUBAGENTS_LEASE_S": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    run_id, pid = data["run_id"], data["pid"]
    cli.hosts.append(pid)  # type: ignore[attr-defined]
    approval_id = _asked(cli, run_id)
    try:
        _stall_past_its_lease(cli, pid)  # alive, renewing nothing, holding no lock
        approved = cli("approve", approval_id)
        assert approved.returncode == 0, approved.stderr
        assert "its host is gone" in approved.stdout
        resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
        code, out, err = finish(resumed)
        assert code == 0, err
        assert run_id in msgspec.json.decode(out)["resumed"]
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: _gone(pid), "the stalled host fenced and gone", DEADLINE_S, pace=0.05)
    assert (cli.root / "out.txt").read_text() == "line\n"  # ran once, by the resuming host
    with cli.store() as store:
        record = store.get_run(run_id)
        kinds = [e.kind for e in store.events(run_id)]
    assert record is not None and record.status == "completed", record
    assert record.outcome is not None and record.outcome.result == "writer got: (no output)"
    assert kinds.count("completed") == 1
    assert _pending(cli) == []


@pytest.fixture
def pg_cli(tmp_path: Path, pg_url: str) -> Iterator[Cli]:
    """The command with the writer in its team, on a PostgreSQL database only (what a
    stalled transaction holds is PostgreSQL's); afterwards no host of this test is left."""
    yield from _hosting(Cli(tmp_path, database=pg_url), writer=WRITER)


@pytest.mark.parametrize("lock", ["FOR UPDATE", "FOR KEY SHARE"])
def test_resume_names_a_host_whose_lease_row_a_transaction_holds(pg_cli: Cli, lock: str) -> None:
    """A host stalled past its lease while a transaction holds its lease row (a host stopped
    inside its renewal holds it ``FOR UPDATE``, one stopped inside a write ``FOR KEY SHARE``,
    its fence's lock, until the server's 60 s idle-in-transaction timeout; here a session of
    the test holds it, idle in its transaction, and the host is SIGSTOPped): the restore
    leaves its runs to it, as documented. `resume` said "0 run(s) resumed" and exited 0; it
    names the host, says its lease row is held inside a transaction, with what
    pg_stat_activity shows, and exits 1. (``FOR KEY SHARE``: the restore skips it, its
    ``FOR UPDATE SKIP LOCKED`` conflicting; a look ``FOR SHARE SKIP LOCKED`` did not, and
    said the host was alive or writing, without pg_stat_activity.)"""
    import psycopg

    from subagents.store.postgres_schema import SCHEMA

    cli = pg_cli
    assert cli.database is not None
    run_id, pid = _detach_writer_with(cli, {"SUBAGENTS_LEASE_S": "1"})
    _asked(cli, run_id)  # its run is live, waiting for the answer
    with cli.store() as store:
        record = store.get_run(run_id)
    assert record is not None and record.owner
    with psycopg.connect(cli.database) as holder:  # a transaction, left open below
        holder.execute(f"SET search_path TO {SCHEMA}")
        locked = holder.execute(
            f"SELECT owner FROM leases WHERE owner = %s {lock}", (record.owner,)
        ).fetchall()
        assert locked == [(record.owner,)]
        os.kill(pid, signal.SIGSTOP)  # alive, renewing nothing: its lease lapses
        try:
            wait_until(
                lambda: bool(_pending(cli)) and _pending(cli)[0]["orphaned"],
                "the stalled host's lease lapsing",
                DEADLINE_S,
                pace=0.2,
            )
            resumed = cli("resume", "--agents", str(cli.agents), "--json")
        finally:
            os.kill(pid, signal.SIGCONT)
            holder.rollback()
    assert resumed.returncode == 1, resumed.stderr
    said = resumed.stderr
    assert f"nothing resumed: 1 run(s) left to their host {record.owner}" in said, said
    assert "it holds its lease row inside a transaction still open" in said, said
    assert "pg_stat_activity: pid" in said and "idle in transaction" in said, said
    with cli.store() as store:
        still = store.get_run(run_id)
    assert still is not None and still.owner == record.owner  # left to it, not taken


def test_resume_takes_a_detached_run_though_another_hosts_lease_row_is_held(pg_cli: Cli) -> None:
    """Two hosts' runs look orphaned: a killed host's detached worker, which outlived its
    ended root, and a stalled host's writer whose lease row a transaction holds (left to it).
    The worker is taken up (a run resumed, not an orphaned root: the restore's ``orphans``
    are roots only); `resume` said "nothing resumed" and exited 1 at once, closing its
    runtime and so cancelling the worker it had just taken. Now it hosts the worker to its
    end, says what it left to the other host, and exits 0."""
    import psycopg
    from test_cli_detached_runs import DLEAD, _both_waiting

    from subagents.store.postgres_schema import SCHEMA

    cli = pg_cli
    assert cli.database is not None
    (cli.agents / "dlead.md").write_text(DLEAD, encoding="utf-8")
    proc = cli.run_team("dlead", "the crash")
    lead, worker = cli.wait_runs(_both_waiting, "the lead and its detached worker waiting", proc)
    assert cli("stop", lead["run_id"], "--turn", "--wait", "60").returncode == 0
    proc.send_signal(signal.SIGKILL)  # the host dies while the detached worker waits
    proc.communicate()
    assert cli("send", worker["run_id"], "resumed").returncode == 0  # waits for the resume
    run_id, pid = _detach_writer_with(cli, {"SUBAGENTS_LEASE_S": "1"})
    _asked(cli, run_id)
    with cli.store() as store:
        record = store.get_run(run_id)
    assert record is not None and record.owner
    with psycopg.connect(cli.database) as holder:  # a transaction, left open below
        holder.execute(f"SET search_path TO {SCHEMA}")
        holder.execute("SELECT owner FROM leases WHERE owner = %s FOR UPDATE", (record.owner,))
        os.kill(pid, signal.SIGSTOP)  # alive, renewing nothing: its lease lapses
        try:
            wait_until(_orphaned(cli), "the stalled host's lease lapsing", DEADLINE_S, pace=0.2)
            resumed = cli("resume", "--agents", str(cli.agents), "--json")
        finally:
            os.kill(pid, signal.SIGCONT)
            holder.rollback()
    assert resumed.returncode == 0, resumed.stderr
    assert f"1 run(s) left to their host {record.owner}" in resumed.stderr, resumed.stderr
    assert "nothing resumed" not in resumed.stderr
    assert worker["run_id"] in msgspec.json.decode(resumed.stdout)["resumed"]
    with cli.store() as store:
        ended, still = store.get_run(worker["run_id"]), store.get_run(run_id)
    assert ended is not None and ended.status == "completed", ended  # hosted to its end
    assert ended.outcome is not None and ended.outcome.result == "worker heard: resumed"
    assert still is not None and still.owner == record.owner  # left to its host


def _detach_writer_with(cli: Cli, env: dict[str, str]) -> tuple[str, int]:
    proc = cli("run", "--detach", "writer", "go", "--agents", str(cli.agents), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    cli.hosts.append(data["pid"])  # type: ignore[attr-defined]
    return data["run_id"], data["pid"]


def _inside_a_transaction(cli: Cli) -> bool:
    """Whether another session holds a transaction open (the stopped host's, here: nothing
    else is connected then). PostgreSQL: a session of the database not idle in
    pg_stat_activity, or a lease row the restore's own lock (``FOR UPDATE SKIP LOCKED``)
    skips. SQLite: the file's write lock held (``BEGIN IMMEDIATE`` refused at once; a host
    stopped holding it makes every other writer fail after its busy timeout)."""
    if cli.database is None:
        import sqlite3

        conn = sqlite3.connect(cli.state, timeout=0, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("ROLLBACK")
        except sqlite3.OperationalError:  # database is locked
            return True
        finally:
            conn.close()
        return False
    import psycopg

    from subagents.store.postgres_schema import SCHEMA

    with psycopg.connect(cli.database, autocommit=True) as conn:
        busy = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
            " AND state <> 'idle'"
        ).fetchone()
        conn.execute(f"SET search_path TO {SCHEMA}")
        leases = conn.execute("SELECT count(*) FROM leases").fetchone()
        free = conn.execute("SELECT owner FROM leases FOR UPDATE SKIP LOCKED").fetchall()
    return bool(busy and busy[0]) or (leases is not None and len(free) != leases[0])


def _stall_past_its_lease(cli: Cli, pid: int) -> None:
    """SIGSTOP the host at a moment it holds no transaction open, until its lease lapses.
    On PostgreSQL a host stopped inside one (a lease renewal, a fenced write) holds its
    lease row's lock: a restore then takes it for a host writing right now and leaves its
    runs to it, as documented (docs/store.md), until the server's idle-in-transaction
    timeout (60 s) ends it; on SQLite it holds the write lock, and every other writer
    (`approve`, the resume) fails after its busy timeout. These tests are of a host stalled
    between its writes. Checked right after the stop and again once the lease lapsed (a
    statement the host sent just before its stop may reach the server after the first
    look: under load the first was not enough); inside one: let go on (it renews its
    lease) and stopped again."""
    for _ in range(20):
        for _ in range(100):
            os.kill(pid, signal.SIGSTOP)
            if not _inside_a_transaction(cli):
                break
            os.kill(pid, signal.SIGCONT)  # inside one: let it finish, stop it again
        else:
            raise AssertionError("the host was inside a transaction at each of 100 stops")
        wait_until(_orphaned(cli), "the stalled host's lease lapsing", DEADLINE_S, pace=0.2)
        if not _inside_a_transaction(cli):
            return
        os.kill(pid, signal.SIGCONT)
        wait_until(
            lambda: not _orphaned(cli)(), "the host renewing its lease", DEADLINE_S, pace=0.2
        )
    raise AssertionError("the host was inside a transaction each of 20 times its lease lapsed")


def _orphaned(cli: Cli) -> Any:
    """Whether the (one) pending approval's run is orphaned: its host's lease lapsed."""
    return lambda: bool(rows := _pending(cli)) and rows[0]["orphaned"]


def test_a_pending_ask_survives_a_sigkill_and_is_answered_after_resume(cli: Cli) -> None:
    run_id, pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    _kill(pid)
    resumed = cli.start("resume", "--agents", str(cli.agents), "--json")
    # the resumed run asks again under the same id, and waits: the ask is still pending
    cli.wait_runs(
        lambda rows: (r := by_agent(rows, "writer", "waiting")) and not r["orphaned"],
        "the resumed writer waiting",
        resumed,
    )
    (row,) = _pending(cli)
    assert row["id"] == approval_id and row["orphaned"] is False
    denied = cli("deny", approval_id, "--reason", "not today")
    assert denied.returncode == 0, denied.stderr
    code, _out, err = finish(resumed)
    assert code == 0, err
    with cli.store() as store:
        record = store.get_run(run_id)
    assert record is not None and record.outcome is not None
    assert record.outcome.result == (
        "writer got: Permission to use Bash was denied: not today (answered through the store)"
    )
    assert not (cli.root / "out.txt").exists()


def test_an_answer_to_an_ended_run_is_refused_naming_why(cli: Cli) -> None:
    run_id, _pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    assert cli("stop", run_id, "--wait", "60").returncode == 0
    refused = cli("approve", approval_id)
    assert refused.returncode == 1
    assert f"its run {run_id} (writer) has ended (cancelled)" in refused.stderr
    assert cli("approvals").stdout.strip() == "no approvals waiting"


def test_an_empty_id_is_bad_usage_and_answers_nothing(cli: Cli) -> None:
    """An empty ID (`subagents approve "$ID"` with ID unset) was a prefix of every id: with
    one approval in the store, it was answered, unseen."""
    run_id, _pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    for verb in ("approve", "deny"):
        for ref in ("", "  "):
            refused = cli(verb, ref)
            assert refused.returncode == 2, (verb, ref, refused.stdout, refused.stderr)
            assert "empty approval id: give an approval id, or a unique prefix of one" in (
                refused.stderr
            )
    (row,) = _pending(cli)  # nothing answered: it can still be
    assert row["id"] == approval_id
    assert cli("approve", f" {approval_id[:8]} ").returncode == 0  # (spaces around: taken)
    assert cli("wait", run_id).returncode == 0
    assert (cli.root / "out.txt").read_text() == "line\n"


def test_a_question_is_answered_with_approve_and_its_reason(cli: Cli) -> None:
    run_id, _pid = _detach_writer(cli, "asker")
    approval_id = _asked(cli, run_id)
    shown = cli("approvals")
    assert "1. Which store should the cache use?" in shown.stdout, shown.stdout
    (row,) = _pending(cli)
    assert row["tool"] == "AskUserQuestion" and row["input"]["questions"][0]["header"] == "Store"
    assert cli("approve", approval_id, "--reason", "SQLite, in .cache/").returncode == 0
    waited = cli("wait", run_id)
    assert waited.returncode == 0, waited.stderr
    assert '"Which store should the cache use?"="SQLite, in .cache/"' in waited.stdout


def test_a_reason_that_is_not_utf8_is_bad_usage_and_the_ask_stays_pending(cli: Cli) -> None:
    """Bytes in another encoding (a Latin-1 terminal) reach Python as lone surrogates: the
    answer's transaction failed with a UnicodeEncodeError traceback (exit 1, nothing said)."""
    run_id, _pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    for option in ("--reason", "--remember"):
        refused = cli.raw("approve", approval_id, option, b"caf\xe9")
        stderr = refused.stderr.decode()
        assert refused.returncode == 2, stderr
        assert f"{option} is not UTF-8 text: byte 0xe9 at character 3" in stderr
        assert "Traceback" not in stderr
    (row,) = _pending(cli)  # nothing answered: it can still be
    assert row["id"] == approval_id
    assert cli("deny", approval_id, "--reason", "café").returncode == 0
    assert cli("wait", run_id).returncode == 0


def test_a_run_waiting_for_an_approval_says_so_in_ps_info_tree_and_attach(cli: Cli) -> None:
    """`waiting` alone does not say a person is needed: every view names the approval."""
    run_id, _pid = _detach_writer(cli)
    approval_id = _asked(cli, run_id)
    attach = cli.start("attach", run_id)  # on a pipe: one line per change of status

    (row,) = [r for r in cli.json("ps") if r["run_id"] == run_id]
    assert row["status"] == "waiting" and row["approvals"] == [approval_id]
    listed = cli("ps")
    assert "APPROVAL" in listed.stdout and approval_id in listed.stdout
    assert "subagents approve ID" in listed.stderr

    info = cli.json("info", run_id)
    assert [a["approval_id"] for a in info["approvals"]] == [approval_id]
    shown = cli("info", run_id).stdout
    assert f"waiting (approval {approval_id})" in shown
    assert f"subagents approve {approval_id}" in shown and f"subagents deny {approval_id}" in shown

    assert cli.json("tree", run_id)["approvals"] == [approval_id]
    assert f"waiting (approval {approval_id})" in cli("tree", run_id).stdout

    assert attach.stdout is not None
    first = attach.stdout.readline()  # its first frame, read while the ask is pending
    assert f"waiting (approval {approval_id})" in first
    assert cli("deny", approval_id, "--reason", "not now").returncode == 0
    code, _out, err = finish(attach)
    assert code == 0, err
    assert cli.json("ps", "--all")[0]["approvals"] == []  # answered: no longer shown
    assert "APPROVAL" not in cli("ps", "--all").stdout


def test_a_foreground_run_on_a_pipe_keeps_its_asks_in_the_store_with_approvals_store(
    cli: Cli,
) -> None:
    """No terminal to ask: `--approvals store` lets another terminal answer; the live tree
    (a journal on a pipe) says what the run waits for."""
    proc = cli.start("run", "writer", "go", "--agents", str(cli.agents), "--approvals", "store")
    run_id = cli.wait_runs(lambda rows: rows[0]["run_id"] if rows else None, "the run", proc)
    approval_id = _asked(cli, run_id)
    assert not (cli.root / "out.txt").exists()
    approved = cli("approve", approval_id, "--reason", "fine")
    assert approved.returncode == 0, approved.stderr
    code, out, err = finish(proc)
    assert code == 0, out + err
    assert (cli.root / "out.txt").read_text() == "line\n"
    assert f"waits for approval {approval_id} (Bash)" in out
    assert f"approval {approval_id} answered: allowed" in out
    assert "calls that need approval wait in the store" in err


def test_approvals_terminal_without_a_terminal_is_bad_usage_and_the_default_denies(
    cli: Cli,
) -> None:
    asked = cli("run", "writer", "go", "--agents", str(cli.agents), "--approvals", "terminal")
    assert asked.returncode == 2
    assert "--approvals terminal: there is no terminal to ask" in asked.stderr
    detached = cli(
        "run", "--detach", "writer", "go", "--agents", str(cli.agents), "--approvals", "deny"
    )
    assert detached.returncode == 2 and "with --detach" in detached.stderr
    assert not cli.state.exists() or cli.runs() == []  # refused before anything ran
    denied = cli.json("run", "writer", "go", "--agents", str(cli.agents))
    assert denied["outcome"]["status"] == "completed"
    assert "denied" in denied["outcome"]["result"] and not (cli.root / "out.txt").exists()


def test_a_run_started_offline_and_resumed_with_a_key_asks_the_api_for_its_real_model(
    cli: Cli,
) -> None:
    """The offline model is recorded as what answered (``answered_by``), never as the run's
    model: a resume with a key asks Claude for the model the run asked for."""
    run_id, pid = _detach_writer(cli)  # no key: the offline model answers its first turn
    approval_id = _asked(cli, run_id)
    with cli.store() as store:
        before = store.get_run(run_id)
    assert before is not None and (before.model, before.answered_by) == ("sonnet", "scripted")
    assert "(answered offline by the scripted model)" in cli("info", run_id).stdout
    _kill(pid)
    with FakeMessagesAPI([text_message("claude took over")]) as api:
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.url}
        resumed = cli.start("resume", "--agents", str(cli.agents), "--json", env=env)
        cli.wait_runs(
            lambda rows: (r := by_agent(rows, "writer", "waiting")) and not r["orphaned"],
            "the resumed writer waiting",
            resumed,
        )
        assert cli("approve", approval_id).returncode == 0
        code, _out, err = finish(resumed)
        assert code == 0, err
        (request,) = api.requests
    assert request.body["model"] == "claude-sonnet-5-5"  # not 'scripted'
    with cli.store() as store:
        after = store.get_run(run_id)
    assert after is not None and after.outcome is not None
    assert after.outcome.result == "claude took over"
    assert (after.model, after.answered_by) == ("sonnet", None)  # Claude answered the rest
