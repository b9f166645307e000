"""The pending approvals on the console's page, in a real browser: a run's ask kept in the
store (``Runtime(approve="store")``, as every `subagents run --detach`) is shown with what it
would do, allowed from the page, and the run goes on; a deny is told to the model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from consolekit import Held, Served, open_settled, serving, settled, wait_for

from damaged_rows import ask, run, saved
from subagents import AgentSpec, Runtime, ScriptedModel, answer_approval
from subagents.console.actions import TEXT_CAP
from subagents.messages import RunStatus
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0
NAMES = ("worker", "refused", "typed", "arriving")
pytestmark = pytest.mark.timeout(240)


def appender(line: str) -> dict[str, Any]:
    """A model step calling Bash to append ``line`` to count.txt (asked in default mode)."""
    return {"tool_calls": [{"name": "Bash", "input": {"command": f"echo '{line}' >> count.txt"}}]}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-approvals")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Apart from the workspace: inside, the runs' commands could write it (refused)."""
    return tmp_path_factory.mktemp("console-approvals-store") / "runs.sqlite3"


@pytest.fixture(scope="module")
def rt(workspace: Path, store_path: Path) -> Iterator[Runtime]:
    model = ScriptedModel(
        {
            "worker": [appender("<b>one</b>"), {"text": "done: {result0}"}],
            "refused": [appender("two"), {"text": "told: {result0}"}],
            "typed": [appender("three"), {"text": "typed: {result0}"}],
            "arriving": [appender("four"), {"text": "arriving: {result0}"}],
        }
    )
    agents = [AgentSpec(name=n, description=f"The {n}.", prompt="Act.") for n in NAMES]
    store = SQLiteStore(store_path)
    with Runtime(
        agents, model=model, workspace=workspace, store=store, approve="store", command_poll_s=0.1
    ) as runtime:
        yield runtime


@pytest.fixture(scope="module")
def served(store_path: Path, rt: Runtime) -> Iterator[Served]:
    with serving(store_path) as served:
        yield served


def test_an_approval_is_allowed_from_the_page_and_the_run_goes_on(
    page: Any, served: Served, rt: Runtime, workspace: Path
) -> None:
    page.goto(served.url)
    handle = rt.spawn("worker", "count")
    row = page.locator("#approvals tr[data-approval]", has_text="worker")
    row.wait_for()
    assert "echo '<b>one</b>' >> count.txt" in (row.locator("pre").text_content() or "")
    assert row.locator("b").count() == 0  # the command is shown as text
    assert row.locator("td.kind").text_content() == "Bash"
    row.locator("button.allow").click()
    outcome = handle.result(WAIT)
    assert outcome.status is RunStatus.COMPLETED
    assert (workspace / "count.txt").read_text() == "<b>one</b>\n"  # the call ran, once
    page.locator("#approvals").wait_for(state="hidden")  # nothing pending any more
    assert rt.approvals() == []


def test_a_deny_from_a_runs_page_is_told_to_the_model(
    page: Any, served: Served, rt: Runtime, workspace: Path
) -> None:
    handle = rt.spawn("refused", "count")
    page.goto(served.url)
    page.goto(f"{served.base}/runs/{handle.run_id}")
    row = page.locator("#approvals tr[data-approval]")
    row.wait_for()
    row.locator("input.reason").fill("not <i>today</i>")
    row.locator("button.deny").click()
    outcome = handle.result(WAIT)
    assert outcome.status is RunStatus.COMPLETED
    assert "not <i>today</i>" in (outcome.result or "")
    count = workspace / "count.txt"
    assert not count.exists() or "two" not in count.read_text()  # the call never ran


ASKER = """---
name: asker
description: Appends a line with Bash (asked in default mode).
tools: Bash
script:
  - tool_calls:
      - name: Bash
        input: {command: "echo stale >> stale.txt"}
  - text: "asker got: {result0}"
---
You ask.
"""


def test_a_row_answered_elsewhere_while_shown_says_why_on_click_and_goes(
    page: Any, served: Served, store_path: Path, workspace: Path
) -> None:
    """The host is dead (killed): an answer given elsewhere reaches no runtime, so no event
    tells the page, which still shows the ask. A click on it was refused (409) and the row
    stayed, its buttons enabled again, clickable forever."""
    agents = workspace / "stale-agents"
    agents.mkdir()
    (agents / "asker.md").write_text(ASKER, encoding="utf-8")
    argv = [sys.executable, "-m", "subagents.cli.main", "run", "--detach", "asker", "go"]
    argv += ["--agents", str(agents), "--state", str(store_path), "--json"]
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    started = subprocess.run(argv, capture_output=True, text=True, cwd=workspace, env=env)
    assert started.returncode == 0, started.stderr
    detached = msgspec.json.decode(started.stdout)
    try:
        open_settled(page, served.url)
        row = page.locator("#approvals tr[data-approval]", has_text="asker")
        row.wait_for()
        approval_id = row.get_attribute("data-approval")
        settled(page)
        # every read of the list from now on waits: the host's death, seen by the server
        # at a poll of its own, reads the list again, and under load that read came after
        # the answer below, and took the row away before the click (CI: the click waited)
        held = Held(page, "**/api/approvals*")
    finally:
        assert detached["pid"] > 0
        os.kill(detached["pid"], signal.SIGKILL)
    assert approval_id is not None
    answer_approval(store_path, approval_id, False, "answered elsewhere")
    assert row.count() == 1  # still shown: nothing told the page
    row.locator("button.allow").click()
    error = page.locator("#error")
    error.wait_for()
    assert f"allow: approval {approval_id} was already answered: denied" in (
        error.text_content() or ""
    )
    held.wait(1)  # the refused answer's read of the list (maybe the death's too)
    held.let_through()
    for n in range(len(held.routes)):
        held.release(n)  # answered now: the row is gone from each list
    row.wait_for(state="detached", timeout=30_000)  # the list read again
    assert not (workspace / "stale.txt").exists()


def test_a_reason_being_typed_stays_when_the_list_is_read_again(
    page: Any, served: Served, rt: Runtime, workspace: Path
) -> None:
    """The list is read again on every ask or answer anywhere, and (since a refused answer
    reads it too) on a reason refused (over the cap) or a busy store. A read in flight while
    the person typed put every row back in the table when it came (``replaceChildren``): the
    reason kept its text, but the field lost the focus, and what was typed next went nowhere
    (CI: the refused over-cap text stayed in the field after the new text was "typed"). The
    reads are held in the browser here while the person types, then let go."""
    typed = rt.spawn("typed", "count")
    open_settled(page, served.url)  # the stream's opening read is not one held below
    row = page.locator("#approvals tr[data-approval]", has_text="typed")
    row.wait_for()
    held = Held(page, "**/api/approvals*")  # every read of the list waits, unanswered
    reason = row.locator("input.reason")
    reason.fill("x" * (TEXT_CAP + 1))
    row.locator("button.allow").click()
    page.locator("#error", has_text="over the cap").wait_for()
    held.wait(1)  # the refused answer's read of the list
    arriving = rt.spawn("arriving", "count")  # another ask: the list is read again (held)
    wait_for(lambda: len(rt.approvals()) == 2, "the second ask in the store")
    reason.fill("not this one")
    reason.press("End")
    held.let_through()  # the reads from now on go through
    for n in range(len(held.routes)):
        held.release(n)  # answered now: each list has both asks
    other = page.locator("#approvals tr[data-approval]", has_text="arriving")
    other.wait_for()  # a held read was applied
    page.keyboard.type(", half typed")  # the person goes on typing where they were
    assert reason.input_value() == "not this one, half typed"
    assert reason.evaluate("(node) => node === document.activeElement")
    row.locator("button.deny").click()
    other.locator("button.deny").click()
    for handle in (typed, arriving):
        assert handle.result(WAIT).status is RunStatus.COMPLETED
    count = workspace / "count.txt"
    assert not count.exists() or "three" not in count.read_text()
    assert "not this one, half typed" in (typed.result(WAIT).result or "")


def test_an_earlier_read_answered_last_does_not_undo_a_later_one(page: Any, tmp_path: Path) -> None:
    """Two reads of the list in flight, answered out of order (the server answers each on a
    thread of its own): the earlier one's list, landing last, took out the row the later one
    had added, and the reason being typed in it (a later read put the row back, empty)."""
    state = tmp_path / "runs.sqlite3"
    first, second, third = run("r-first", 1.0), run("r-second", 2.0), run("r-third", 0.5)
    saved(state, [first, second, third], [ask(first, 0, 1.0, "ap-first")])
    read_again = "document.dispatchEvent(new Event('console:approvals'))"  # (as the stream)
    with serving(state) as served:
        open_settled(page, served.url)  # the stream's opening read is not one held below
        page.locator('#approvals tr[data-approval="ap-first"]').wait_for()
        held = Held(page, "**/api/approvals*", answered_now=True)
        page.evaluate(read_again)
        held.wait(1)  # answered already: the first ask alone
        saved(state, [], [ask(second, 1, 2.0, "ap-second")])
        page.evaluate(read_again)
        held.wait(2)  # both asks
        held.release(1)
        row = page.locator('#approvals tr[data-approval="ap-second"]')
        row.wait_for()
        reason = row.locator("input.reason")
        reason.fill("half typed")
        held.release(0)  # the earlier read's answer comes last
        held.let_through()
        # an ask older than all (another host's clock): its row goes first, before the one
        # being typed in, which stays the same node with its focus (a read after the late
        # answer: its row shows that it came)
        saved(state, [], [ask(third, 2, 0.5, "ap-third")])
        page.evaluate(read_again)
        page.locator('#approvals tr[data-approval="ap-third"]').wait_for()
        assert reason.input_value() == "half typed"
        assert reason.evaluate("(node) => node === document.activeElement")
        ids = page.locator("#approvals tr[data-approval]").evaluate_all(
            "(rows) => rows.map((r) => r.dataset.approval)"
        )
        assert ids == ["ap-third", "ap-first", "ap-second"]


def test_an_ask_made_before_the_stream_opened_is_shown(page: Any, tmp_path: Path) -> None:
    """The list was read when the page loaded, then only on the stream's word: an ask made
    after that read but before the stream was open (its word published to no one) was not
    shown until some other ask came (CI, under load: the first test's row never came). The
    stream is held in the browser here until the ask is in the store."""
    state = tmp_path / "runs.sqlite3"
    first = run("r-first", 1.0)
    saved(state, [first])
    with serving(state) as served:
        held = Held(page, "**/api/stream*")
        with page.expect_response(lambda r: "/api/approvals" in r.url):
            page.goto(served.url)  # the list read: nothing waits
        held.wait(1)
        saved(state, [], [ask(first, 0, 1.0, "ap-first")])  # (no event: the store alone)
        held.let_through()
        held.release(0)
        page.locator('#approvals tr[data-approval="ap-first"]').wait_for()
