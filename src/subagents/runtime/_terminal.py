"""How a runtime's messages name its store to a terminal: the ``--state`` a ``subagents``
command needs to read the same store (a hint copied from a message must not read the
terminal's default one). Apart: both a wait's time out (``_run_handle``) and a restore's
(``_supervisor_asks``) name it, and neither may import the other."""

from __future__ import annotations

import shlex

from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore


def terminal_state(store: RunStore | None) -> str | None:
    """How ``subagents`` in a terminal names ``store`` (``--state``, quoted for a shell); ""
    when it can say nothing more (a cluster's: ``--ray``; a store of the user's); None when
    no terminal reaches it: a store in memory (the default) lives in this process alone."""
    from subagents.store.sqlite import SQLiteStore  # (only on a time out: not at import)

    if store is None or isinstance(store, MemoryStore):
        return None
    where = getattr(store, "where", None)  # a database's URL, its password left out
    if isinstance(where, str):
        return f" --state {shlex.quote(where)}"
    if isinstance(store, SQLiteStore):
        return f" --state {shlex.quote(str(store.path))}"
    return ""
