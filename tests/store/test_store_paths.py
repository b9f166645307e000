"""Where the store lives by default."""

from __future__ import annotations

from pathlib import Path

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
