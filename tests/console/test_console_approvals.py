"""The pending approvals on the console's page, in a real browser: a run's ask kept in the
store (``Runtime(approve="store")``, as every `subagents run --detach`) is shown with what it
would do, allowed from the page, and the run goes on; a deny is told to the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consolekit import Served, serving

from subagents import AgentSpec, Runtime, ScriptedModel
from subagents.messages import RunStatus
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0
NAMES = ("worker", "refused")
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
