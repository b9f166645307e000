"""Record builders and helpers shared by the store tests."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from subagents.messages import (
    ChatMessage,
    Checkpoint,
    Event,
    EventKind,
    Lease,
    Mail,
    MailState,
    Outcome,
    RunRecord,
    RunStatus,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from subagents.store.fencing import Fence, FencedStore
from subagents.store.migrations import MIGRATIONS
from subagents.store.schema import create_v1, set_schema_version

SRC = str(Path(__file__).resolve().parents[2] / "src")


def run(run_id: str, **fields: Any) -> RunRecord:
    base: dict[str, Any] = {"agent": "worker", "task": f"task of {run_id}", "root_run_id": run_id}
    base.update(fields)
    return RunRecord(run_id=run_id, **base)


def event(run_id: str, kind: EventKind = EventKind.STEP, **data: Any) -> Event:
    return Event(kind=kind, run_id=run_id, agent="worker", root_run_id=run_id, ts=1.5, data=data)


def mail(mail_id: str, sender: str, recipient: str, **fields: Any) -> Mail:
    return Mail(
        mail_id=mail_id, sender=sender, recipient=recipient, content=f"hi {mail_id}", **fields
    )


def outcome(run_id: str, status: RunStatus = RunStatus.COMPLETED, **fields: Any) -> Outcome:
    return Outcome(run_id=run_id, status=status, result=f"result of {run_id}", **fields)


def checkpoint(run_id: str, step: int, text: str = "hello") -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        step=step,
        messages=(
            ChatMessage(role="user", content=(TextBlock(text=text),)),
            ChatMessage(
                role="assistant",
                content=(ToolUseBlock(id="tu1", name="spawn_subagent", input={"agent": "x"}),),
            ),
        ),
        answered=(ToolResultBlock(tool_use_id="tu1", content="done", is_error=False),),
        usage=Usage(input_tokens=10, output_tokens=5, cost_usd=0.25, model_calls=1),
        ts=2.5,
    )


def python(
    code: str, *args: str, drop_root: bool = False, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (another process) with the package importable.

    ``drop_root``: when running as root, first drop the capabilities that let root ignore file
    permissions (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so that read-only files and
    directories are read-only to the child as they would be to any user.
    """
    preamble = ""
    if drop_root and os.geteuid() == 0:
        preamble = textwrap.dedent(
            """
            import ctypes
            _libc = ctypes.CDLL(None, use_errno=True)
            class _Header(ctypes.Structure):
                _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]
            class _Data(ctypes.Structure):
                _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                            ("inheritable", ctypes.c_uint32)]
            _h = _Header(0x20080522, 0)
            _d = (_Data * 2)()
            assert _libc.capget(ctypes.byref(_h), _d) == 0, ctypes.get_errno()
            _mask = ~((1 << 1) | (1 << 2)) & 0xFFFFFFFF
            _d[0].effective &= _mask
            _d[0].permitted &= _mask
            _d[0].inheritable &= _mask
            assert _libc.capset(ctypes.byref(_h), _d) == 0, ctypes.get_errno()
            """
        )
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", preamble + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


LEASE = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
"""The lease of the runtime a sender's record is made under (``fenced``)."""


def fenced(store: SQLiteStore) -> FencedStore:
    """``store`` as a sender's runtime writes to it: under ``LEASE``, taken now."""
    return FencedStore(store, Fence(LEASE.owner, store.acquire_lease(LEASE)))


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """What ``sql`` gives on a connection of its own to the SQLite file at ``path``."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@contextlib.contextmanager
def traced(store: SQLiteStore) -> Iterator[list[str]]:
    """The statements run on ``store``'s connection inside the block, in the list it gives,
    each once when the block ends (raising or not): SQLite traces a trigger's program (v14's
    ``runs_one_end``; v11-v14's ``mail_receipt``, entered by every insert into ``mail``) with
    its statement's text again, so a text repeated at once is one statement."""
    seen: list[str] = []
    store._tx.connection().set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        store._tx.connection().set_trace_callback(None)
        seen[:] = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]


def store_of_version(path: Path, version: int) -> sqlite3.Connection:
    """A new SQLite file at ``path`` as a store of schema ``version`` made it (v1, then each
    migration up to ``version``), its connection left in a transaction: the test adds rows
    as that version wrote them, then commits and closes it."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    create_v1(conn)
    for migration in MIGRATIONS[: version - 1]:  # (MIGRATIONS[0] makes v2)
        migration(conn)
    set_schema_version(conn, version)
    return conn


__all__ = [
    "LEASE",
    "MailState",
    "checkpoint",
    "event",
    "fenced",
    "mail",
    "outcome",
    "python",
    "rows",
    "run",
    "store_of_version",
    "traced",
]


if TYPE_CHECKING:  # psycopg is imported only when a PostgreSQL test runs
    from subagents.store.postgres import PostgresStore
    from subagents.store.sqlite import SQLiteStore

Durable: TypeAlias = "SQLiteStore | PostgresStore"
"""A store that outlives its process: what the tests beyond the protocol run against. Here,
not in conftest.py: a test module importing ``conftest`` gets whichever conftest.py pytest
loaded first under that name (tests/console's, when the lowest-bounds step collects both)."""
