"""Mail taken straight from run to run survives SIGKILL exactly once.

Each trial starts ``mail_crash_job.py`` (a ping-pong of function agents by run id, on a
SQLite store, every mail recorded by its sender, then handed to its recipient, the
supervisor told after; or on a PostgreSQL database, where every mail goes through the
supervisor, which records it first: ``PostgresStore.mail_recording``), kills it with SIGKILL
at a round picked by a seed (the pinger prints each; sometimes twice), then starts it again
until it finishes. The store must then hold every ping and every pong exactly once, each
read, and the result must be the whole exchange in order: a recipient acted only on recorded
mail, and a resumed sender did not send again what it had recorded.

``SUBAGENTS_CRASH_TRIALS`` sets the number of trials (default 10).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from job_kit import start_job

from subagents.messages import MailState, RunStatus
from subagents.store.opening import open_location

sys.path.insert(0, str(Path(__file__).parent))
from mail_crash_job import ROUNDS

JOB = Path(__file__).with_name("mail_crash_job.py")
TRIALS = int(os.environ.get("SUBAGENTS_CRASH_TRIALS", "10"))
EXPECTED = ",".join(f"pong ping {i}" for i in range(ROUNDS))


def _start(db: Path | str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start_job(JOB, db, out, *extra)


def _check_store(db: Path | str) -> None:
    store = open_location(db)
    try:
        runs = store.list_runs()
        assert sorted(r.agent for r in runs) == ["pinger", "ponger", "root"]
        assert {r.status for r in runs} == {RunStatus.COMPLETED}, [
            (r.agent, r.status) for r in runs
        ]
        (ping,) = [r for r in runs if r.agent == "pinger"]
        mail = {m.mail_id: m for m in store.mail_for(ping.run_id)}
        contents = Counter(m.content for m in mail.values())
        wanted = [f"ping {i}" for i in range(ROUNDS)] + [f"pong ping {i}" for i in range(ROUNDS)]
        assert contents == Counter(wanted), contents  # none lost, none twice
        sent = Counter((m.sender, m.request_id) for m in mail.values())
        assert all(n == 1 for n in sent.values()), sent
        assert {m.state for m in mail.values()} == {MailState.READ}
    finally:
        store.close()


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
@pytest.mark.parametrize("seed", range(TRIALS))
def test_a_killed_ping_pong_resumes_with_every_mail_once(
    seed: int, where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    rng = random.Random(seed)
    out = tmp_path / "out.json"
    db: Path | str = (
        request.getfixturevalue("pg_url") if where == "postgres" else tmp_path / "runs.db"
    )
    killed = 0
    for _ in range(1 + (seed % 3 == 2)):
        proc = _start(db, out)
        assert proc.stdout is not None
        at = f"round {rng.randrange(ROUNDS - 1)}\n".encode()
        line = proc.stdout.readline()  # "ready", or (resumed) a replayed round before it
        while line and line != at:  # (replayed rounds are printed again: any will do)
            line = proc.stdout.readline()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        killed += bool(line)
    proc = _start(db, out)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = msgspec.json.decode(out.read_bytes())
    assert result == {"status": "completed", "result": EXPECTED}, f"seed {seed}, killed {killed}"
    _check_store(db)


def test_a_kill_while_the_record_of_straight_mail_is_uncommitted_loses_nothing(
    tmp_path: Path,
) -> None:
    """SIGKILL between the senders' commits and the supervisor's: its group, holding the
    record of the mail that went straight (events, journal entries, read receipts), lingers
    here for minutes (actors/group_linger.py), so the kill finds mail committed by its
    senders whose record is not. The resumed job still ends with every mail once and read:
    a resumed sender finds its mail by its request id, a resumed recipient reads again what
    its lost receipts covered."""
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    proc = _start(db, out, "600", "20")  # (the pinger holds after round 20 until killed)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and line != b"round 20\n":
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert line == b"round 20\n", "the job ended before the kill"
    store = open_location(db)
    try:
        (ping,) = [r for r in store.list_runs() if r.agent == "pinger"]
        kept = store.mail_for(ping.run_id)
        unread = [m for m in kept if m.state is not MailState.READ]
        assert len(kept) >= 42, len(kept)  # rounds 0-20: the senders' commits
        assert unread, "every receipt was committed: the kill missed the window"
        held = [m for m in kept if m.content == "pong ping 20"]  # read, its receipt held
        assert [m.state for m in held] == [MailState.DELIVERED], held
    finally:
        store.close()
    proc = _start(db, out)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = msgspec.json.decode(out.read_bytes())
    assert result == {"status": "completed", "result": EXPECTED}
    _check_store(db)
