"""A run page opened at the path the server matches, whatever the path's shape: a run id with
a slash unencoded (``/runs/a/b``: the server serves run ``a/b``, the page's script took the
last part and showed run ``b``) or encoded, and one with escapes; and a query giving the token
twice. The real `subagents serve` in a subprocess (``consolekit.serving``) on a real SQLite
store; the page in a real Chromium."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from consolekit import Served, serving
from msgspec.structs import replace

from damaged_rows import ask, run, saved

IDS = ("a/b", "b", "café", "100%", "a?b#c", "\U0001f600 x")

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Runs ``a/b``, ``b`` and ``café``, each with its own task and a pending approval."""
    path = tmp_path_factory.mktemp("paths") / "runs.sqlite3"
    now = time.time()
    runs = [replace(run(i, now + n), task=f"the task of {i}") for n, i in enumerate(IDS)]
    saved(path, runs, [ask(r, n, now + n, f"ap-{n}") for n, r in enumerate(runs)])
    with serving(path) as served:
        yield served


def _shown(page: Any, base: str, path: str, run_id: str) -> None:
    """``path``'s page shows run ``run_id`` (its task, its approval alone)."""
    page.goto(base + path)
    task = f"the task of {run_id}"
    page.wait_for_function(
        "(t) => (document.querySelector('#facts')?.textContent || '').includes(t)", arg=task
    )
    asked = f"ap-{IDS.index(run_id)}"
    page.locator(f'#approvals tr[data-approval="{asked}"]').wait_for()
    rows = page.locator("#approvals tr[data-approval]")
    assert rows.count() == 1, (path, page.locator("#approvals").text_content())
    assert page.locator("#title").text_content().strip().startswith("quick " + run_id), path


def test_a_run_page_shows_the_run_its_path_names(page: Any, served: Served) -> None:
    page.goto(served.url)  # the token into the cookie
    page.locator("#tree tr[data-run]").first.wait_for()
    for path, run_id in {
        "/runs/a/b": "a/b",
        "/runs/a%2Fb": "a/b",
        "/runs/b": "b",
        "/runs/caf%C3%A9": "café",
        "/runs/100%": "100%",  # (no escape: as the server reads it)
    }.items():
        _shown(page, served.base, path, run_id)
    for run_id in IDS:  # the console's own links, as its scripts make them
        path = page.evaluate("(id) => '/runs/' + encodeURIComponent(id)", run_id)
        _shown(page, served.base, path, run_id)


def test_a_query_giving_the_token_twice_is_refused(served: Served) -> None:
    """Which one counted was the parser's choice (the last); now neither: a clear 400."""
    for query in (
        f"token=x&token={served.token}",
        f"token={served.token}&token={served.token}",
        f"tok%65n=x&tok%65n={served.token}",  # the name as the query's parser reads it
    ):
        status, _, body = served.request("GET", f"/api/runs?{query}")
        assert status == 400, (query, status, body)
        assert body == b"the query gives the token 2 times: give it once\n", body
    status, _, _ = served.request("GET", f"/api/runs?token={served.token}")
    assert status == 200
