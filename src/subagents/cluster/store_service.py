"""StoreService: a ``RunStore`` served to other processes, one request at a time.

Why: on a cluster the SQLite file lives on the head node and only the head's process opens
it (SQLite over a network file system loses its locking guarantees, and one writer keeps
group commit). Every other process (a node, the CLI on any machine, the driver) reaches it
through ``remote_store.ClusterStore``, which sends ``StoreCall``s here. This class is the
part that does not depend on Ray (``head`` wraps it in a Ray actor), so it is tested
with plain calls.

What a request may do is named by the protocol method it calls, checked against the lists
below: nothing else of the store (its ``sweep``, its connection) is reachable from outside.

- ``write(calls)``: writes, all in one transaction (one client ``batch()`` is one call, so
  the batch is atomic and costs one commit on the head); a runtime's batch starts with
  ``check_fence(owner, epoch)`` (``store.fencing``), run here inside that transaction, so a
  writer whose lease was taken over has its whole batch refused (``Fenced``);
- ``call(call)``: one read, or one write that answers (``post_command``, ``take_commands``,
  ``acquire_lease``, ``renew_lease``), in a transaction of its own;
- ``read_within(held, call)``: a read made inside a client's batch must see the batch's own
  writes, which are not committed yet: they are applied in a transaction, the read is made,
  and the transaction is rolled back. The batch is sent for real when it ends.
"""

from __future__ import annotations

import inspect
import os
import socket
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from subagents.store.base import DamagedRow, RunStore, StoreError

PROTOCOL = 4
"""The version of what a ``ClusterStore`` and a ``StoreService`` say to each other (the calls
and what they answer: a new read such as ``get_runs``, the damaged rows' data growing a
field): raised whenever either changes shape. A client refuses a service of another version
at its start, naming both (``remote_store.ClusterStore``): a detached head outlives its
driver, and an upgraded driver reaching the old head (``get_if_exists``) had its recovery
retry a read the head refused for ever, an old driver misread the new head's damaged rows.
A service of before session 27 has none (the head's ``protocol`` is missing).

And the head refuses a caller of another version (``caller_protocol``): every call a process
makes to the head (its store's, a node's registration) says the caller's version, as its
last argument. A process of before session 27 checks nothing and says nothing: a newer head
served it (session 27), and it misread what it was answered. 4 (session 31): a new read,
``ended_among`` (the ends look's: the ended ids alone, no record sent); 3 (session 30): the
link between the driver and its node hosts carries msgpack frames (``cluster/wire.py``) and
a node's lease question (``LeaseLeft``): a node host of session 29 cannot read them, and is
refused at its registration instead of hanging silent; 2 (session 28): every call says
it; 1 (session 27): the client checked the head's; none before."""


def caller_protocol(theirs: object) -> None:
    """A ``StoreError`` unless ``theirs`` (what a call to the head said of its caller's
    version; None: nothing, a process of session 27 or before: its ``ClusterStore`` checked
    the head's protocol but said none, and its node hosts and a ``head_actor`` given a path
    call the head before any check) is ``PROTOCOL``: the message
    says which side runs what and which process to upgrade."""
    if theirs == PROTOCOL:
        return
    said = (
        "says no protocol version: it runs a subagents of session 27 or older"
        if theirs is None
        else f"runs protocol {theirs!r}"
    )
    raise StoreError(
        f"this cluster's head runs subagents protocol {PROTOCOL}; the process calling it"
        f" {said}: a head and the processes using it must run the same subagents. Upgrade"
        " the calling process (the driver, a node's subagents, or the CLI) to the head's"
        " version; nothing was read or written"
    )


class StoreCall(msgspec.Struct, frozen=True, array_like=True):
    """One protocol method call: its name and its arguments."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = msgspec.field(default_factory=dict)


class StoreInfo(msgspec.Struct, frozen=True):
    """Which store a ``StoreService`` serves, and where."""

    path: str
    """The SQLite file, a path on the serving host (``""`` for an in-memory store)."""
    host: str
    pid: int


WRITES = frozenset(
    {
        "save_run",
        "append_event",
        "save_checkpoint",
        "save_mail",
        "save_mails",
        "set_mail_state",
        "set_mails_state",
        "save_journal",
        "save_subscription",
        "drop_subscriptions",
        "add_to_checkpoint",
        "save_outcome",
        "mark_outcome_delivered",
        "save_approval",
        "release_lease",
        "post_command",
        "check_fence",
        "save_preview",
        "drop_preview",
    }
)
"""Writes a client may hold inside its batch and send at once: they answer nothing, or (a
command posted inside the supervisor's group commit) nobody reads their answer."""

ANSWERING_WRITES = frozenset(
    {
        "post_command",
        "take_commands",
        "renew_lease",
        "acquire_lease",
        "answer_approval",
    }
)
"""Writes whose answer the caller needs at once: never held in a batch."""

READS = frozenset(
    {
        "get_run",
        "get_runs",
        "ended_among",
        "list_runs",
        "events",
        "events_after",
        "last_event_seq",
        "load_checkpoint",
        "mail_for",
        "journal_of",
        "subscriptions",
        "undelivered_outcomes",
        "leases",
        "get_approval",
        "list_approvals",
        "previews",
        "pending_command_runs",
    }
)

SPARING = frozenset({"list_runs", "list_approvals"})
"""The listings that can leave a damaged row out and name it (``list_runs_sparing``)."""


class _Undo(Exception):
    """Raised inside a batch to roll it back once the read it was opened for is made."""


class StoreService:
    """Serves one ``RunStore`` (on a cluster: the head's ``SQLiteStore``)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        path = getattr(store, "path", None)
        self._info = StoreInfo(
            path=str(path) if path is not None else "", host=socket.gethostname(), pid=os.getpid()
        )

    def info(self) -> StoreInfo:
        return self._info

    def protocol(self) -> int:
        """``PROTOCOL``: what its clients check first."""
        return PROTOCOL

    def list_runs_sparing(
        self, call: StoreCall, held: Sequence[StoreCall] = ()
    ) -> tuple[Any, list[tuple[str, str | None, str | None, str | None, bool]]]:
        """A listing (``call``: ``list_runs`` or ``list_approvals``) leaving out the rows that
        do not read as records, with each of those named as data (``DamagedRow.as_data``:
        its message, key, table and place in its tree): the caller's
        ``damaged`` list cannot be filled across the link, so the damage comes back as data
        (``ClusterStore``). With ``held`` (a client's batch's writes): as it would list after
        them (``read_within``)."""
        if call.method not in SPARING:
            raise StoreError(f"store call {call.method!r}: not a listing that spares damage")
        method = self._method(call, READS)
        damaged: list[DamagedRow] = []
        if "damaged" in inspect.signature(method).parameters:  # (objects: never damaged)
            records = self._within(held, lambda: method(*call.args, **call.kwargs, damaged=damaged))
        else:
            records = self._within(held, lambda: method(*call.args, **call.kwargs))
        return records, [exc.as_data() for exc in damaged]

    def write(self, calls: Sequence[StoreCall]) -> None:
        """Apply ``calls`` (writes only) in one transaction: all of them or none."""
        methods = [self._method(c, WRITES) for c in calls]  # every name checked before any write
        with self.store.batch():
            for method, c in zip(methods, calls, strict=True):
                method(*c.args, **c.kwargs)

    def call(self, call: StoreCall) -> Any:
        """One read, or one answering write, in a transaction of its own."""
        return self._method(call, READS | ANSWERING_WRITES)(*call.args, **call.kwargs)

    def write_then(self, held: Sequence[StoreCall], call: StoreCall) -> Any:
        """``held`` (writes) and then ``call`` (an answering write: a claim of commands) in
        one transaction; ``call``'s answer."""
        answering = self._method(call, ANSWERING_WRITES)
        methods = [self._method(c, WRITES) for c in held]
        with self.store.batch():
            for method, c in zip(methods, held, strict=True):
                method(*c.args, **c.kwargs)
            return answering(*call.args, **call.kwargs)

    def read_within(self, held: Sequence[StoreCall], call: StoreCall) -> Any:
        """``call`` (a read) as it would answer after ``held`` (writes), which are then undone."""
        read = self._method(call, READS)
        return self._within(held, lambda: read(*call.args, **call.kwargs))

    def _within(self, held: Sequence[StoreCall], read: Callable[[], Any]) -> Any:
        """``read()``'s answer after ``held`` (writes), which are then undone (none: read as
        it is, in a transaction of its own)."""
        if not held:
            return read()
        methods = [self._method(c, WRITES) for c in held]  # every name checked before any write
        result: Any = None
        try:
            with self.store.batch():
                for method, c in zip(methods, held, strict=True):
                    method(*c.args, **c.kwargs)
                result = read()
                raise _Undo
        except _Undo:
            pass
        return result

    def _method(self, call: StoreCall, allowed: frozenset[str]) -> Callable[..., Any]:
        if call.method not in allowed:
            raise StoreError(f"store call {call.method!r}: not something a client may call here")
        method: Callable[..., Any] = getattr(self.store, call.method)
        return method
