"""Where the store lives by default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.store.paths import default_state_dir, default_store_path


def test_own_variable_wins() -> None:
    env = {"SUBAGENTS_STATE_DIR": "/srv/agents", "XDG_STATE_HOME": "/x", "HOME": "/home/u"}
    assert default_store_path(env) == Path("/srv/agents/runs.sqlite3")


def test_xdg_state_home_next() -> None:
    env = {"XDG_STATE_HOME": "/xdg/state", "HOME": "/home/u"}
    assert default_store_path(env) == Path("/xdg/state/subagents/runs.sqlite3")


def test_home_last() -> None:
    assert default_state_dir({"HOME": "/home/u"}) == Path("/home/u/.local/state/subagents")


def test_empty_and_relative_values_are_ignored() -> None:
    env = {"SUBAGENTS_STATE_DIR": "", "XDG_STATE_HOME": "relative/dir", "HOME": "/home/u"}
    assert default_store_path(env) == Path("/home/u/.local/state/subagents/runs.sqlite3")


def test_own_variable_may_be_relative_to_the_working_directory() -> None:
    assert default_state_dir({"SUBAGENTS_STATE_DIR": "here"}) == Path.cwd() / "here"


def test_the_tests_default_store_is_never_the_users(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The session's fixture (tests/conftest.py ``state_of_the_session``) keeps every store a
    test opens without a path out of the user's own state directory."""
    users = Path(os.path.expanduser("~")) / ".local" / "state" / "subagents"
    assert default_state_dir() != users
    assert default_store_path().parent == default_state_dir()
    assert tmp_path_factory.getbasetemp() in default_state_dir().parents
