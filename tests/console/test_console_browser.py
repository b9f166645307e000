"""The console in a real browser (headless Chromium, Playwright): the tree appears and follows
a run as it works, text from a model is shown as text, the stop button stops a run.

The runs are real: a Runtime in this process writes a SQLite store, and the real `subagents
serve` reads it in a subprocess, as when a person runs `subagents run` in one terminal and
opens the console from another. A run waits on an event the test releases; every wait is
on something the page shows, with a hang guard, never a sleep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consolekit import Served, serving

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import RunStatus
from subagents.store.sqlite import SQLiteStore

WAIT = 60.0
INJECTION = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">said plainly'

pytestmark = pytest.mark.timeout(240)


class Team:
    """The runtime hosting the tests' runs, and the gate its `gate` agent waits on."""

    def __init__(self, rt: Runtime, released: threading.Event) -> None:
        self.rt = rt
        self.released = released


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-browser") / "runs.sqlite3"


@pytest.fixture(scope="module")
def team(state: Path) -> Iterator[Team]:
    released = threading.Event()

    def gate(ctx: AgentContext) -> str:
        """Holds until the test releases it."""
        assert released.wait(WAIT), "the test never released the gate"
        return "released"

    async def boss(ctx: AgentContext) -> str:
        """Spawns the gate and reports what it said."""
        outcome = await ctx.spawn("gate", "hold the door")
        return f"gate said {outcome.result}"

    agents = [
        FunctionAgent.create("boss", boss),
        FunctionAgent.create("gate", gate),
        AgentSpec(name="talker", description="Says something a page must not run."),
        AgentSpec(name="sleeper", description="Thinks for a long time."),
    ]
    model = ScriptedModel(
        {"talker": [{"text": INJECTION}], "sleeper": [{"text": "zzz", "delay": 120}]}
    )
    with Runtime(agents, model=model, store=SQLiteStore(state), command_poll_s=0.1) as rt:
        yield Team(rt, released)
        released.set()


@pytest.fixture(scope="module")
def served(state: Path, team: Team) -> Iterator[Served]:
    with serving(state) as served:
        yield served


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.locator("#connection[data-state='live']").wait_for()


ROW_STATUS = """([agent, status]) => [...document.querySelectorAll('#tree tr[data-run]')]
    .some((tr) => tr.querySelector('a.agent').textContent === agent
                  && tr.dataset.status === status)"""


def test_the_tree_appears_and_follows_a_run_without_reloading(
    page: Any, served: Served, team: Team
) -> None:
    _open(page, served.url)
    assert page.url == f"{served.base}/"  # the token went into a cookie, out of the address
    page.evaluate("window.sameDocument = true")
    handle = team.rt.spawn("boss", "lead the <b>team</b>")
    page.wait_for_function(ROW_STATUS, arg=["gate", "running"])
    page.wait_for_function(ROW_STATUS, arg=["boss", "waiting"])
    boss_row = page.locator(f'#tree tr[data-run="{handle.run_id}"]')
    assert boss_row.locator("td.task").text_content() == "lead the <b>team</b>"
    assert page.locator("#tree td.task b").count() == 0  # shown as text, not made bold
    gate_row = page.locator("#tree tr[data-run]", has=page.locator("a.agent", has_text="gate"))
    assert gate_row.locator("td").nth(2).text_content() == "1"  # depth
    team.released.set()
    page.wait_for_function(ROW_STATUS, arg=["gate", "completed"])
    page.wait_for_function(ROW_STATUS, arg=["boss", "completed"])
    assert handle.result(WAIT).result == "gate said released"
    assert page.evaluate("window.sameDocument") is True  # updated in place, never reloaded
    # the child sits under its parent, in the parent's tree
    order = page.locator(f'#tree tbody[data-root="{handle.run_id}"] tr[data-run]')
    assert order.count() == 2
    assert order.nth(0).get_attribute("data-run") == handle.run_id


def test_a_models_text_with_a_script_is_shown_as_text(
    page: Any, served: Served, team: Team
) -> None:
    outcome = team.rt.run("talker", "say <i>something</i>", wait=WAIT)
    assert outcome.status is RunStatus.COMPLETED
    _open(page, served.url)
    _open(page, f"{served.base}/runs/{outcome.run_id}")
    assistant = page.locator("li.entry-assistant pre.text")
    assistant.first.wait_for()
    assert assistant.first.text_content() == INJECTION
    assert page.locator("#entries script, #entries img, #facts i").count() == 0
    assert page.evaluate("window.pwned") is None
    assert "say <i>something</i>" in (page.locator("#facts").text_content() or "")


def test_the_stop_button_stops_the_run(page: Any, served: Served, team: Team) -> None:
    handle = team.rt.spawn("sleeper", "sleep on it")
    _open(page, served.url)
    _open(page, f"{served.base}/runs/{handle.run_id}")
    page.locator("#stop:not([disabled])").wait_for()
    page.click("#stop")
    page.locator("#action-result", has_text="stop posted").wait_for()
    page.locator("#title .status", has_text="cancelled").wait_for()
    assert handle.result(WAIT).status is RunStatus.CANCELLED
    assert page.locator("#stop").is_disabled()
