"""Runs: what a run is (``RunRecord``), how it ended (``Outcome``), what it used (``Usage``),
and the ids every record is named by.

The store keeps these, the supervisor holds them in memory, views and the command line read
them; a cluster pickles them to other processes (``gc=False``: see ``RunRecord``).
"""

from __future__ import annotations

import enum
import random
import time
from typing import Any, Literal, get_args

import msgspec

OnFailure = Literal["report", "retry", "fail_parent"]
"""What a run's failure does: its requester is told (``report``), the run is tried again
(``retry``), or its requester fails too (``fail_parent``) (docs/supervision.md). Named once:
definitions, spawn requests, records and the runtime's ``spawn`` share it."""
ON_FAILURE: tuple[OnFailure, ...] = get_args(OnFailure)

Cleanup = Literal["keep", "delete"]
"""What the sweeper does with a run once archived: keep its transcript or delete it."""
CLEANUPS: tuple[Cleanup, ...] = get_args(Cleanup)


class Usage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Tokens (and an estimated cost) consumed by one model call, one run or a subtree."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0
    model_calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        # Nothing added to nothing spent (a run's first step, a budget's first charge): the
        # other as it is (frozen), not a new one made field by field
        if self == _NONE_USED:
            return other
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            model_calls=self.model_calls + other.model_calls,
        )

    @property
    def total_input_tokens(self) -> int:
        """All input counters added, as the Messages API bills them."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.total_input_tokens + self.output_tokens


_NONE_USED = Usage()


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    BUDGET_EXCEEDED = "budget_exceeded"

    terminal: bool
    """Whether a run in this status has ended (``TERMINAL_STATUSES``). Each member's own
    attribute, set once below, not a property: read on every change of every run (five
    times in a trivial run's decisions: a call each as a property)."""


TERMINAL_STATUSES = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.TIMED_OUT,
        RunStatus.BUDGET_EXCEEDED,
    }
)
for _status in RunStatus:
    _status.terminal = _status in TERMINAL_STATUSES


class Outcome(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """How a run ended: its one terminal status, its result or its error.

    ``result`` is text: what an LLM agent answered, what a function agent returned if it
    returned a string, else the JSON text of the value it returned. ``typed`` says which:
    then ``value`` decodes it, so a function agent's ``42`` is ``42`` again (and a dict a
    dict), in memory, through the store and after a restart alike. The value is kept once,
    as its text, so a typed result costs no more to store than a text one.
    """

    run_id: str
    status: RunStatus
    result: str | None = None
    error_kind: str | None = None
    error: str | None = None
    usage: Usage = Usage()
    steps: int = 0
    typed: bool = False
    """``result`` is the JSON text of a value a function agent returned (``value``)."""

    @property
    def ok(self) -> bool:
        return self.status is RunStatus.COMPLETED

    @property
    def value(self) -> Any:
        """The run's value: what a function agent returned, decoded from its JSON (lists,
        dicts, numbers, booleans, None: a returned Struct or dataclass comes back as a dict,
        see ``value_as``); the text for any other result; None for a run that did not
        complete. Decoded on each access: keep it in a variable rather than asking twice."""
        if self.result is None or self.status is not RunStatus.COMPLETED:
            return None
        if not self.typed:
            return self.result
        return msgspec.json.decode(self.result) if self.result else None

    def value_as(self, type: Any) -> Any:
        """The value decoded as ``type`` (a Struct, a dataclass, ``list[int]``...);
        ``msgspec.ValidationError`` if it does not fit."""
        if self.result is None or self.status is not RunStatus.COMPLETED:
            return msgspec.convert(None, type)
        if not self.typed:
            return msgspec.convert(self.result, type)
        return msgspec.json.decode(self.result or "null", type=type)


class PermissionGrant(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """What one requester of a run was allowed, as its definition said when it spawned the
    run. A run's effective permissions are its own (the runtime's, tightened by its
    definition) intersected with every grant of its ``ceiling``: permissions only narrow down
    the tree (``supervision.ceilings``, applied by ``tools.permissions``). Kept in the run's
    record, so a run restored after a crash, or hosted on another node, keeps them without
    its parent."""

    agent: str
    run_id: str
    mode: str | None = None
    """The requester's ``permissionMode`` (None: its definition set none)."""
    tools: tuple[str, ...] | None = None
    """Its ``tools`` (None: every tool)."""
    disallowed_tools: tuple[str, ...] = ()
    network: str | None = None
    """Its definition's ``network`` ("off" turns it off for every run below it too)."""


class RunRecord(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """The durable record of one run: one execution of one agent on one task.

    ``gc=False`` (also on Outcome and Usage, as on Mail): every live run holds two (the
    supervisor's and the store's), and each full pass of the cyclic GC walked them; they
    hold strings, numbers, these structs and JSON-like ``shared`` data, never themselves."""

    run_id: str
    agent: str
    task: str
    root_run_id: str
    parent_run_id: str | None = None
    depth: int = 0
    context: str | None = None
    label: str | None = None
    model: str | None = None
    status: RunStatus = RunStatus.QUEUED
    background: bool = False
    created_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    deadline_s: float = 300.0
    outcome: Outcome | None = None
    usage: Usage = Usage()
    steps: int = 0
    tool_calls: int = 0
    """Tool calls its model made (spawns and mail included), as reported by its agent."""
    restarts: int = 0
    cleanup: Cleanup = "keep"
    request_id: str | None = None
    """The requester's handle for this run (the parent's tool_use id); recovery after a
    crash matches children to the parent's pending tool calls by it."""
    owner: str | None = None
    """The process hosting this run (``host:pid``); another runtime on the same store
    leaves it alone while that process lives."""
    node: str | None = None
    """On a Ray cluster: the node (Ray's node id) its latest start was placed on; None on one
    machine (docs/cluster.md)."""
    # supervision policies (docs/supervision.md)
    token_budget: int | None = None
    cost_budget_usd: float | None = None
    on_failure: OnFailure = "report"
    retries: int = 0
    shared: dict[str, Any] = msgspec.field(default_factory=dict)
    ceiling: tuple[PermissionGrant, ...] = ()
    """What its requesters were allowed, root first: it may never do more (set at admission
    from its parent's record and definition, never recomputed)."""
    continues: str | None = None
    """The ended run whose conversation this one went on with (``Runtime.continue_run``);
    that run's record is left as it ended."""
    approvals_in_store: bool = False
    """Its asks are kept in the store as pending approvals, answered from any process
    (``Runtime(approve="store")``, ``subagents run --detach``): the route of its whole tree,
    kept so that a resumed run asks where it asked before."""
    detached: bool = False
    """Spawned with ``detach``: its parent's end does not cancel it (it is a background
    child; its outcome goes to its nearest live ancestor, and stays in the store)."""
    answered_by: str | None = None
    """What answers its model calls when it is not the model it asks for (``model``): the
    offline scripted model (``scripted``: no API key, ``--offline``, the demos); None when
    the model asked for answers. Set at each start by the runtime starting it, so a run
    started offline and resumed with a key says None, and ``model`` stays the one asked for
    (a resume asks the API for it, never for ``scripted``)."""


def new_id(prefix: str = "", now: float | None = None) -> str:
    """A short, sortable, unique id: time in ms (hex) plus 40 random bits.

    ``now``: the wall-clock time to stamp (the supervisor passes its injected clock's). The
    bits come from ``random``, not ``secrets``: ids need to be unique, not unguessable, and
    ``secrets`` makes a system call per id (see benchmarks/README.md, "Findings").
    """
    ms = int((time.time() if now is None else now) * 1000)
    # (``%`` formatting: an f-string's two format specs cost ~1.7k instructions more)
    return "%s%011x%010x" % (prefix, ms, random.getrandbits(40))  # noqa: UP031
