"""A host SIGKILLed while its model is half way through streaming a turn: `subagents resume`
asks for the whole turn again, and the run's history is what it would have been had nothing
happened (one assistant turn, no delta stored); the preview the dead host left is what
`log -f` showed until then, and nothing of it outlives the resumed run.

Real processes (the `subagents` command, the real SDK) against the local Messages API server,
whose first answer stops half way through its stream until the test has killed the host."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import msgspec
from clikit import DEADLINE_S, Cli, finish

from polling import wait_until
from subagents.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: fake_messages_api

from fake_messages_api import FakeMessagesAPI, paused, text_message

ANSWER = "The catalog is read far more than it is written: cache it, and drop it on writes."


def test_a_host_killed_mid_stream_resumes_to_the_history_of_an_unbroken_run(
    tmp_path: Path,
) -> None:
    cli = Cli(tmp_path)
    stalled, resume = paused(text_message(ANSWER), after=6, chunk=10)  # 3 deltas, then waits
    with FakeMessagesAPI([stalled, text_message(ANSWER)]) as api:
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.url}
        host = cli.start("run", "quick", "cache?", "--agents", str(cli.agents), "--json",
                         env=env)  # fmt: skip
        try:
            run_id = cli.wait_runs(
                lambda rows: rows[0]["run_id"] if rows else None, "the run admitted", host
            )

            def preview() -> str | None:
                with SQLiteStore(cli.state) as store:
                    kept = store.previews([run_id]).get(run_id)
                return kept.text if kept is not None else None

            # every piece out before the stall: the first at once, the others by the timer
            wait_until(lambda: preview() == ANSWER[:30], "a third of the answer", DEADLINE_S, 0.05)
            os.kill(host.pid, signal.SIGKILL)
            finish(host)
        finally:
            resume.set()
        assert cli.json("ps", "--all")[0]["orphaned"] is True
        resumed = cli("resume", "--agents", str(cli.agents), "--json", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert len(api.requests) == 2  # the whole turn asked for again
    with SQLiteStore(cli.state) as store:
        record = store.get_run(run_id)
        assert record is not None and record.outcome is not None
        assert record.outcome.result == ANSWER and record.steps == 1
        checkpoint = store.load_checkpoint(run_id)
        assert checkpoint is not None
        roles = [m.role for m in checkpoint.messages]
        assert roles[-1] == "assistant" and roles.count("assistant") == 1
        assert "text_delta" not in {e.kind for e in store.events(run_id)}
        assert store.previews([run_id]) == {}
    entries = msgspec.json.decode(cli("log", run_id, "--json").stdout)["entries"]
    said = [e["text"] for e in entries if e["kind"] == "assistant"]
    assert said == [ANSWER]  # once: nothing of the broken attempt
