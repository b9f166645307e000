"""`subagents run` on Claude: with ANTHROPIC_API_KEY the real SDK is used, --model picks the
model, and the base URL points at a local Messages API server written for the tests."""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
from clikit import Cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: fake_messages_api

from fake_messages_api import FakeMessagesAPI, error_reply, text_message


def test_run_uses_claude_with_a_key_and_the_chosen_model(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    with FakeMessagesAPI([text_message("answer from claude", input_tokens=12)]) as api:
        env = {"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": api.url}
        proc = cli("run", "quick", "a question", "--agents", str(cli.agents), "--model",
                   "haiku", "--json", env=env)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        (request,) = api.requests
    assert "offline" not in proc.stderr
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "claude-haiku-5-5"
    assert request.body["messages"][0]["content"][0]["text"] == "a question"
    data = msgspec.json.decode(proc.stdout)
    assert data["outcome"]["result"] == "answer from claude"
    assert data["runs"][0]["usage"]["input_tokens"] == 12
    assert (data["runs"][0]["model"], data["runs"][0]["answered_by"]) == ("haiku", None)
    assert "answered offline" not in cli("info", data["runs"][0]["run_id"]).stdout


def test_a_rejected_key_fails_the_run_naming_the_variable(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    with FakeMessagesAPI([error_reply(401, "authentication_error", "invalid x-api-key")]) as api:
        env = {"ANTHROPIC_API_KEY": "sk-bad", "ANTHROPIC_BASE_URL": api.url}
        proc = cli("run", "quick", "q", "--agents", str(cli.agents), "--json", env=env)
    assert proc.returncode == 1, proc.stderr
    outcome = msgspec.json.decode(proc.stdout)["outcome"]
    assert outcome["status"] == "failed"
    assert "ANTHROPIC_API_KEY" in outcome["error"]
