"""The browser of the console's tests: the system's headless Chromium (Debian's ``chromium``,
which .ci/run installs) driven by Playwright for Python.

Missing here (no Playwright, no Chromium), the browser tests are skipped saying what to
install; in CI (``CI=true``) that is a failure instead: a console test never passes there by
not running.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM_ENV = "SUBAGENTS_CHROMIUM"


def _chromium() -> str | None:
    given = os.environ.get(CHROMIUM_ENV)
    if given:
        return shutil.which(given)  # a path that is not an executable: as if none
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _missing(why: str) -> None:
    message = (
        f"{why}: the console's browser tests need Playwright for Python (the `test` extra) and"
        f" Chromium (`apt-get install chromium`, or ${CHROMIUM_ENV}=PATH)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message + " (CI: they must run)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed")
    executable = _chromium()
    if executable is None:
        _missing(f"no chromium on the PATH (or ${CHROMIUM_ENV})")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox"], headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        yield page
    finally:
        context.close()
