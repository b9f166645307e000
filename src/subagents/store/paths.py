"""Where the durable run store lives when the caller names no path.

The store is per user, not per project: the command line (`subagents ps`) must find the runs
a runtime started from any directory. So it goes in the user's state directory, as the XDG
base directory spec defines it (state = data that survives restarts but is not worth backing
up), with one override for tests and unusual setups.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

STORE_FILENAME = "runs.sqlite3"
STATE_DIR_ENV = "SUBAGENTS_STATE_DIR"


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory holding the store: ``$SUBAGENTS_STATE_DIR``, else
    ``$XDG_STATE_HOME/subagents``, else ``~/.local/state/subagents``.

    Empty values are ignored, and so is a relative ``XDG_STATE_HOME`` (the XDG spec says
    relative paths there are invalid). ``SUBAGENTS_STATE_DIR`` may be relative: it is the
    caller's explicit choice and is resolved against the working directory.
    """
    env = os.environ if env is None else env
    own = env.get(STATE_DIR_ENV, "")
    if own:
        return Path(own).expanduser().absolute()
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "subagents"
    home = env.get("HOME", "")
    base = Path(home) if home else Path.home()
    return base / ".local" / "state" / "subagents"


HOSTS_DIR = "hosts"
"""Beside the store: ``hosts/RUN.log``, the output of the background process hosting the
tree whose root is RUN (``subagents run --detach``). The sweeper deletes a run's log when it
cleans or deletes the run (``host_log``)."""


def host_log(store_path: Path, run_id: str) -> Path:
    """Where the host of the tree rooted at ``run_id`` writes its output."""
    return store_path.parent / HOSTS_DIR / f"{run_id}.log"


def default_store_path(env: Mapping[str, str] | None = None) -> Path:
    """The store file used when ``SQLiteStore`` is given no path."""
    return default_state_dir(env) / STORE_FILENAME
