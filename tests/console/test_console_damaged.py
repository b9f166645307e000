"""The console over a store with a damaged runs row (its record no longer reads): it starts,
lists every other run, and names the damaged one (its run id, what is wrong) in its JSON API
(``/api/runs``: ``damaged``) and on the page. Before, the one row failed the console's load
(``subagents serve`` did not start), or, damaged later, every poll (every page stale)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from consolekit import serving

from damaged_rows import ask, damage_asks, damage_run, run, saved
from subagents.console.feed import StoreFeed
from subagents.messages import Event, EventKind, RunRecord, RunStatus
from subagents.store.sqlite import SQLiteStore

BAD, GOOD = "r-bad", "r-good"


def _runs(path: Path, *run_ids: str) -> list[RunRecord]:
    """Running runs of a host that is gone (tests/damaged_rows.py)."""
    made = [run(i, time.time(), agent="worker", status=RunStatus.RUNNING) for i in run_ids]
    saved(path, made)
    return made


def test_the_console_lists_the_other_runs_and_names_the_damaged_one(tmp_path: Path) -> None:
    state = tmp_path / "runs.sqlite3"
    _runs(state, BAD, GOOD)
    damage_run(state, BAD)
    with serving(state) as served:
        status, _, body = served.request("GET", "/api/runs", headers=served.authorized())
        assert status == 200, body
        page = json.loads(body)
        assert [row["id"] for row in page["rows"]] == [GOOD]
        assert list(page["damaged"]) == [BAD]
        assert "cannot read runs row 'r-bad'" in page["damaged"][BAD]
        assert "JSON is malformed" in page["damaged"][BAD]
        status, _, script = served.request("GET", "/static/tree.js", headers=served.authorized())
        assert status == 200 and b"its record is damaged" in script  # the page names it


def test_a_record_damaged_after_the_load_is_named_and_the_poll_goes_on(tmp_path: Path) -> None:
    """A run whose record is damaged after the load, then written about (an event): the
    poll names it and still sees the other runs' changes."""
    state = tmp_path / "runs.sqlite3"
    _runs(state, BAD, GOOD)
    with SQLiteStore(state) as writer, SQLiteStore(state) as reader:
        feed = StoreFeed(reader)
        assert feed.load() == 2 and feed.damaged == {}
        damage_run(state, BAD)
        for run_id in (BAD, GOOD):
            writer.append_event(
                Event(kind=EventKind.STEP, run_id=run_id, agent="worker", root_run_id=run_id)
            )
        changes = feed.poll()
        assert changes.touched == {BAD, GOOD}
        assert list(feed.damaged) == [BAD]
        assert "cannot read runs row 'r-bad'" in feed.damaged[BAD]


def test_the_console_lists_the_other_approvals_when_one_approvals_row_is_damaged(
    tmp_path: Path, page: Any
) -> None:
    """A damaged approvals row made ``/api/approvals`` fail (503), so no approval could be
    answered from the page; the row is now left out, named in the server's log, in
    ``/api/approvals?v=2``'s ``damaged`` and on the page (it was only logged)."""
    state = tmp_path / "runs.sqlite3"
    records = _runs(state, BAD, GOOD)
    saved(state, [], [ask(r, n, float(n), f"ap-{r.run_id}") for n, r in enumerate(records)])
    damage_asks(state, BAD)
    with serving(state, warned="cannot read approvals row 'ap-r-bad'") as served:
        status, _, body = served.request("GET", "/api/approvals", headers=served.authorized())
        assert status == 200, body
        assert [a["approval_id"] for a in json.loads(body)] == [f"ap-{GOOD}"]  # v1: a list
        status, _, body = served.request("GET", "/api/approvals?v=2", headers=served.authorized())
        assert status == 200, body
        listed = json.loads(body)
        assert [a["approval_id"] for a in listed["approvals"]] == [f"ap-{GOOD}"]
        assert list(listed["damaged"]) == [f"ap-{BAD}"]
        assert "cannot read approvals row 'ap-r-bad'" in listed["damaged"][f"ap-{BAD}"]
        status, _, body = served.request("GET", "/api/approvals?v=3", headers=served.authorized())
        assert status == 400 and b"no version '3' of the approvals: 1 or 2" in body, body
        page.goto(served.url)
        named = page.locator("#approvals ul.damaged li")
        named.wait_for()
        said = named.text_content() or ""
        assert said.startswith("a damaged row: ap-r-bad, "), said
        assert "cannot read approvals row 'ap-r-bad': JSON is malformed" in said
        assert page.locator(f'#approvals tr[data-approval="ap-{GOOD}"]').count() == 1
        # answering the damaged one (its id, as a stale page would post it): refused naming
        # the damage, nothing answered; the healthy one is still there to answer
        headers = {
            "X-Console-Token": served.token,
            "Origin": f"http://127.0.0.1:{served.port}",
            "Content-Type": "application/json",
        }
        status, _, body = served.request(
            "POST", f"/api/approvals/ap-{BAD}/allow", headers=headers, body=b"{}"
        )
        # 409: the row is at fault, not the store (503 would say "try again later")
        assert status == 409 and b"cannot read approvals row 'ap-r-bad'" in body, (status, body)
        with sqlite3.connect(state) as db:
            assert db.execute("SELECT count(*) FROM commands").fetchone() == (0,)
        status, _, body = served.request("GET", "/api/approvals", headers=served.authorized())
        assert [a["approval_id"] for a in json.loads(body)] == [f"ap-{GOOD}"]
        # the healthy one answered on the page: only the damaged row is left, and the
        # section stays shown naming it (it hid when no approval waited)
        good = page.locator(f'#approvals tr[data-approval="ap-{GOOD}"]')
        good.locator("button.deny").click()
        good.wait_for(state="detached")
        assert named.is_visible() and page.locator("#approvals").is_visible()
        assert (named.text_content() or "").startswith("a damaged row: ap-r-bad, ")


def test_a_damaged_rows_key_and_what_is_wrong_are_shown_as_text(tmp_path: Path, page: Any) -> None:
    """The damaged row's key is a hand-edited file's to choose (markup, a script): it is
    named on the page as text, never as HTML."""
    state = tmp_path / "runs.sqlite3"
    hostile = "ap-<img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
    (record,) = _runs(state, BAD)
    saved(state, [], [ask(record, 0, 1.0, hostile)])
    damage_asks(state, BAD)
    with serving(state, warned="cannot read approvals row") as served:
        page.goto(served.url)
        named = page.locator("#approvals ul.damaged li")
        named.wait_for()
        assert (named.text_content() or "").startswith(f"a damaged row: {hostile}, ")
        assert page.locator("#approvals img, #approvals b").count() == 0
        assert page.title() != "pwned"


def test_each_damaged_row_is_named_apart_and_its_hostile_key_clipped(tmp_path: Path) -> None:
    """A damaged row's key is whoever edited the file's to choose: two approvals of one run
    with 1 MB ids alike in their first characters, and a run with a 1 MB id. Before, the
    ids went whole into ``/api/approvals?v=2`` and ``/api/runs`` (and the server's log), and
    two keys named alike would be one entry: each row is now an entry, its key clipped as
    an error quotes a request's value (docs/console.md)."""
    state = tmp_path / "runs.sqlite3"
    long_run = "r-" + "x" * 1_000_000
    (owner,) = _runs(state, BAD)
    ids = ["ap-" + "y" * 1_000_000 + end for end in ("1", "2")]
    saved(state, [run(long_run, 1.0)], [ask(owner, n, float(n), i) for n, i in enumerate(ids)])
    damage_asks(state, BAD)
    damage_run(state, long_run)
    with serving(state, warned="console damaged approval") as served:
        status, _, body = served.request("GET", "/api/approvals?v=2", headers=served.authorized())
        assert status == 200 and len(body) < 10_000, (status, len(body))
        damaged = json.loads(body)["damaged"]
        clipped = "ap-" + "y" * 97 + "... (clipped: 1000004 characters in all)"
        assert list(damaged) == [clipped, f"{clipped} (2)"], list(damaged)
        for what in damaged.values():
            assert f"cannot read approvals row '{clipped}': JSON is malformed" in what, what
        status, _, body = served.request("GET", "/api/runs", headers=served.authorized())
        assert status == 200 and len(body) < 10_000, (status, len(body))
        named = json.loads(body)["damaged"]
        clipped = "r-" + "x" * 98 + "... (clipped: 1000002 characters in all)"
        assert list(named) == [clipped], list(named)
        assert f"cannot read runs row '{clipped}': JSON is malformed" in named[clipped]
    assert served.stderr.stat().st_size < 20_000, served.stderr.stat().st_size  # the log too
