"""The console in a real browser (headless Chromium, Playwright): the tree appears and follows
a run as it works, text from a model is shown as text, the stop button stops a run.

The runs are real: a Runtime in this process writes a SQLite store, and the real `subagents
serve` reads it in a subprocess, as when a person runs `subagents run` in one terminal and
opens the console from another. A run waits on an event the test releases; every wait is
on something the page shows, with a hang guard, never a sleep.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from consolekit import Held, Served, serving

from subagents import AgentSpec, FunctionAgent, Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext
from subagents.messages import RunRecord, RunStatus
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

    async def listener(ctx: AgentContext) -> str:
        """Waits for one mail and says what it heard."""
        mail = await ctx.receive(timeout=WAIT)
        return f"heard {mail.content}" if mail is not None else "heard nothing"

    agents = [
        FunctionAgent.create("listener", listener),
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


TALKER = """---
name: talker
description: Says something a page must not run.
script:
  - text: "first words"
  - text: "went on"
---
You talk.
"""


@pytest.fixture(scope="module")
def served(state: Path, team: Team) -> Iterator[Served]:
    """The console; a continuation it starts loads ``talker`` from a folder, offline."""
    agents = state.parent / "agents"
    agents.mkdir()
    (agents / "talker.md").write_text(TALKER, encoding="utf-8")
    with serving(state, "--agents", str(agents), "--offline") as served:
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


def test_mail_sent_from_the_page_reaches_the_run(page: Any, served: Served, team: Team) -> None:
    handle = team.rt.spawn("listener", "wait for word")
    _open(page, served.url)
    _open(page, f"{served.base}/runs/{handle.run_id}")
    page.locator("#send:not([disabled])").wait_for()
    page.fill("#send-text", "hello <b>there</b>")
    page.click("#send")
    page.locator("#action-result", has_text="mail posted").wait_for()
    assert handle.result(WAIT).result == "heard hello <b>there</b>"
    page.locator("#title .status", has_text="completed").wait_for()
    assert "hello <b>there</b>" in (page.locator("#mail-in").text_content() or "")


def test_a_text_typed_while_mail_is_posted_stays(page: Any, served: Served, team: Team) -> None:
    """The send's answer cleared the field: what was typed after the click, while the mail
    was being posted, went with it."""
    handle = team.rt.spawn("listener", "wait for word")
    _open(page, served.url)
    _open(page, f"{served.base}/runs/{handle.run_id}")
    page.locator("#send:not([disabled])").wait_for()
    held = Held(page, "**/send")
    page.fill("#send-text", "the first word")
    page.click("#send")
    held.wait(1)
    page.fill("#send-text", "the next word, half typed")
    held.release(0)
    page.locator("#action-result", has_text="mail posted").wait_for()
    assert page.input_value("#send-text") == "the next word, half typed"
    assert handle.result(WAIT).result == "heard the first word"


def test_a_read_of_a_filter_left_does_not_land_in_the_next(
    page: Any, served: Served, team: Team
) -> None:
    """Each submit reads the runs again: an answer for the filter left (in flight when the
    next was submitted) added its runs to the next one's page."""
    team.rt.run("talker", "talk", wait=WAIT)
    listener = team.rt.spawn("listener", "hear one word")
    listener.send("the word")
    assert listener.result(WAIT).result == "heard the word"
    _open(page, served.url)
    page.wait_for_function(ROW_STATUS, arg=["listener", "completed"])
    held = Held(page, "**/api/runs?*")
    page.click("#clear")  # every run: its read is held
    page.fill("#filters input[name=agent]", "talker")
    page.click("#filters button[type=submit]")  # the talker's runs: held too
    held.wait(2)
    with page.expect_response(lambda r: "agent=talker" not in r.url) as left:
        held.release(0)  # the filter left is answered first
    left.value.finished()
    held.release(1)
    page.locator("#tree tr[data-run]").first.wait_for()
    agents = page.locator("#tree tr[data-run] a.agent").all_text_contents()
    assert agents and set(agents) == {"talker"}
    assert "agent=talker" in page.url


def test_continue_from_the_page_starts_a_run_that_goes_on(
    page: Any, served: Served, team: Team, state: Path
) -> None:
    outcome = team.rt.run("talker", "open", wait=WAIT)
    _open(page, served.url)
    _open(page, f"{served.base}/runs/{outcome.run_id}")
    page.locator("#continue:not([disabled])").wait_for()  # the page has read the run
    assert page.locator("#stop").is_disabled()  # it has ended: only continue is offered
    page.fill("#continue-text", "and then?")
    page.click("#continue")
    link = page.locator("#action-result a", has_text="open the new run")
    link.wait_for()
    new_id = (link.get_attribute("href") or "").rsplit("/", 1)[-1]
    link.click()
    page.locator("#title .status", has_text="completed").wait_for()
    with SQLiteStore(state) as store:
        record = store.get_run(new_id)
    assert record is not None and record.continues == outcome.run_id
    assert record.task == "and then?"
    # the script's second turn: the conversation it went on with had the first one's answer
    assert record.outcome is not None and record.outcome.result == "went on"


def test_the_filters_keep_the_runs_asked_for_and_go_in_the_address(
    page: Any, served: Served, team: Team
) -> None:
    team.rt.run("talker", "one more", wait=WAIT)
    _open(page, served.url)
    page.wait_for_function(ROW_STATUS, arg=["talker", "completed"])
    page.fill("#filters input[name=agent]", "talker")
    page.select_option("#filters select[name=status]", "completed")
    page.click("#filters button[type=submit]")
    page.wait_for_url(f"{served.base}/?status=completed&agent=talker")
    page.locator("#connection[data-state='live']").wait_for()
    page.wait_for_function(
        """() => { const agents = [...document.querySelectorAll('#tree tr[data-run] a.agent')];
                   return agents.length > 0 && agents.every((a) => a.textContent === 'talker'); }"""
    )
    statuses = page.locator("#tree tr[data-run]").evaluate_all(
        "(rows) => rows.map((tr) => tr.dataset.status)"
    )
    assert set(statuses) == {"completed"}


def test_a_browser_without_the_token_gets_nothing(browser: Any, served: Served) -> None:
    context = browser.new_context()  # no cookie: someone who has not been given the URL
    try:
        page = context.new_page()
        for path in ("/", "/static/tree.js", "/api/runs"):
            response = page.goto(served.base + path)
            assert response is not None and response.status == 401, path
            assert "no valid token" in (page.text_content("body") or "")
    finally:
        context.close()


EVIL = "http://evil.example"


def test_a_page_elsewhere_cannot_make_the_browser_stop_a_run(
    page: Any, served: Served, team: Team, state: Path
) -> None:
    """The browser holds the console's cookie; a page of another site tries every way a page
    has to post to it: a form, a no-cors fetch with the cookie, a JSON fetch (preflighted)."""
    handle = team.rt.spawn("sleeper", "sleep through an attack")
    _open(page, served.url)  # the cookie is set in this browser
    page.route(f"{EVIL}/**", lambda r: r.fulfill(body="<p>hi</p>", content_type="text/html"))
    page.goto(f"{EVIL}/")
    target = f"{served.base}/api/runs/{handle.run_id}/stop"
    answers = page.evaluate(
        """async (target) => {
            const said = [];
            try {
                await fetch(target, {method: "POST", mode: "no-cors", credentials: "include",
                                     body: "{}"});
                said.push("no-cors sent");
            } catch (e) { said.push("no-cors failed"); }
            try {
                const r = await fetch(target, {method: "POST", credentials: "include",
                    headers: {"Content-Type": "application/json"}, body: "{}"});
                said.push("json " + r.status);
            } catch (e) { said.push("json refused"); }
            return said;
        }""",
        target,
    )
    # the JSON post needs a preflight, which is not answered; the no-cors one is sent or not
    # as the browser decides (Chromium keeps public sites from loopback addresses)
    assert answers[1] == "json refused"
    with page.expect_navigation():
        page.evaluate(
            """(target) => { const f = document.createElement("form");
                             f.method = "POST"; f.action = target; document.body.append(f);
                             f.submit(); }""",
            target,
        )
    assert "no valid token" in (page.text_content("body") or "")  # SameSite kept it back
    # every request was answered before this: none of them posted a stop
    assert ("stop", handle.run_id) not in _commands(state)
    assert handle.run_id in team.rt.stop(handle.run_id)  # it was still running
    assert handle.result(WAIT).status is RunStatus.CANCELLED


def _commands(path: Path) -> list[tuple[str, str]]:
    """Every command ever posted to the store (taken or not), read from the file itself."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return [(kind, run_id) for kind, run_id in db.execute("SELECT kind, run_id FROM commands")]


def test_a_page_refused_a_stream_says_it_does_not_follow_changes(
    browser: Any, tmp_path: Path
) -> None:
    # past --max-streams the stream is answered 503, after which a browser does not try
    # again: the page said "reconnecting…" for ever (tests/console/test_console_limits.py
    # has the bound itself)
    path = tmp_path / "runs.sqlite3"
    with SQLiteStore(path) as store:
        store.save_run(
            RunRecord(
                run_id="r1", agent="worker", task="t", root_run_id="r1",
                status=RunStatus.COMPLETED, created_at=1.0,
            )
        )  # fmt: skip
    with serving(path, "--max-streams", "1") as served:
        pages = [browser.new_context().new_page() for _ in range(2)]
        try:
            _open(pages[0], served.url)
            pages[1].goto(served.url)
            refused = pages[1].locator("#connection[data-state='stopped']")
            refused.wait_for(timeout=WAIT * 1000)
            assert "reload" in refused.inner_text()
            pages[1].locator("#tree tr[data-run='r1']").wait_for()  # the data still came
        finally:
            for page in pages:
                page.context.close()
