"""`subagents demo` end to end: the real command in a subprocess, on the offline model."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

import msgspec


def _demo(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "subagents.cli.main", "demo", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_demo_shows_every_feature_it_promises() -> None:
    proc = _demo("--json")
    assert proc.returncode == 0, proc.stderr
    data = msgspec.json.decode(proc.stdout)
    runs = {r["agent"]: r for r in data["runs"]}
    assert data["outcome"]["status"] == "completed"
    # a parallel fan-out of (at least) three children of the lead
    lead = runs["lead"]
    children = [r for r in data["runs"] if r.get("parent_run_id") == lead["run_id"]]
    assert len(children) >= 3
    # a grandchild at depth 2
    assert runs["fact-checker"]["depth"] == 2
    # two siblings mailing each other with a reply
    sent = Counter(e["agent"] for e in data["events"] if e["kind"] == "mail_sent")
    assert sent["critic"] >= 1 and sent["writer"] >= 1
    assert "section 2 is ready" in runs["critic"]["outcome"]["result"]
    # a run queued under the concurrency limit
    assert any(e["kind"] == "queued" for e in data["events"])
    # one child over its timeout while the others finish
    assert runs["deep-diver"]["status"] == "timed_out"
    for name in ("researcher", "critic", "writer", "fact-checker"):
        assert runs[name]["status"] == "completed", name
    # a child restarted by the supervisor after its model call failed, then done
    restarts = [e for e in data["events"] if e["kind"] == "restarted"]
    assert [e["agent"] for e in restarts] == ["flaky"]
    assert runs["flaky"]["status"] == "completed" and runs["flaky"]["restarts"] == 1
    # a child stopped at its token budget
    assert runs["spender"]["status"] == "budget_exceeded"
    assert runs["spender"]["usage"]["input_tokens"] > 0
    # the parent combined what came back
    result = data["outcome"]["result"]
    assert "Survey complete" in result and "Draft written" in result
    assert "timed_out" in result


def test_demo_human_output_ends_with_result_and_a_line_per_run() -> None:
    proc = _demo()
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b[" not in out  # not a terminal: no ANSI codes
    assert "Result (completed):" in out
    runs_section = out.split("Runs:", 1)[1]
    agents = ("lead", "researcher", "fact-checker", "critic", "writer", "deep-diver", "flaky")
    for agent in (*agents, "spender"):
        assert agent in runs_section
    assert "queued (position" in out
    assert "restart #1" in out
    assert "budget_exceeded" in out
