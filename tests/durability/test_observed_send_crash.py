"""A mail sent straight after an observation survives SIGKILL with what was observed.

``observed_send_job.py``: ``looker`` looks at its mailbox (empty; or receives with a timeout
of 0: nothing), sends "saw 0" straight to
``echo`` (the mail is its sender's own commit), and ``echo`` answers "hello". The job is
killed with the supervisor's group lingering for minutes (actors/group_linger.py), so the
journal entry of the look may be uncommitted while the mail it decided is committed. The
resumed ``looker`` must not look again (its mailbox now holds "hello": it would decide "saw
1" under the key of the "saw 0" it sent, and fail its replay as non-deterministic, or go on
from a look that never decided anything sent): the job ends as it would have without the
kill, every mail once and read.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import msgspec
import pytest
from job_kit import start_job

from subagents.messages import MailState, RunStatus
from subagents.store.opening import open_location

JOB = Path(__file__).with_name("observed_send_job.py")


def _start(db: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start_job(JOB, db, out, *extra)


@pytest.mark.parametrize("look", ["mailbox", "timeout"])
def test_a_send_decided_by_an_observation_resumes_from_what_was_observed(
    look: str, tmp_path: Path
) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    proc = _start(db, out, look, "600")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and line != b"replied\n":
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert line == b"replied\n", "the job ended before the kill"
    assert not out.exists()  # killed, not finished: the resumed run is the one tested
    proc = _start(db, out, look)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = msgspec.json.decode(out.read_bytes())
    assert result == {"status": "completed", "result": "saw 0, got hello"}, err.decode()[-3000:]
    store = open_location(db)
    try:
        runs = {r.agent: r for r in store.list_runs()}
        assert {r.status for r in runs.values()} == {RunStatus.COMPLETED}
        mail = store.mail_for(runs["looker"].run_id)
        assert sorted(m.content for m in mail) == ["hello", "saw 0"]
        assert {m.state for m in mail} == {MailState.READ}
    finally:
        store.close()
