"""Limits: the numbers that keep a tree of agents in line, with their defaults."""

from __future__ import annotations

import sys

import msgspec

from subagents.tools.shell_limits import PER_RUN as SHELLS_PER_RUN
from subagents.tools.shell_limits import PER_RUNTIME as SHELLS_PER_RUNTIME

MAX_TIMEOUT_S = 3600.0
CHILDREN_CAP = 50
"""The most live children a definition's ``maxChildren`` gets when no cap is set."""


class LimitError(ValueError):
    """A limit was given a value that cannot work (negative, zero, above the maximum)."""


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Runtime-wide limits. Definitions may tighten them; two are defaults a definition may
    raise up to a ceiling (as a run's timeout may exceed ``timeout_s`` up to ``max_timeout_s``).

    ``max_depth``: a root run has depth 0; a child has its parent's depth + 1. Deeper
    spawns are refused.
    ``max_concurrency`` / ``per_agent`` / ``per_tier`` / ``max_children`` (per parent): runs
    working at once, in all, of one agent, of one tier, among one parent's children. Runs over
    any of them wait in a FIFO queue (never refused); a waiting run lends its slot to a queued
    run that needs it (``supervision/slots.py``). ``queue_bound``: at most that many runs
    queued (a bound on memory: a few KiB a queued run); past it, spawns are refused.
    ``max_children`` applies to a parent whose definition sets no ``maxChildren``; a
    definition's ``maxChildren`` is honoured up to ``max_children_cap`` (a team written for
    six parallel children gets six, not a default of five it never asked for).
    ``timeout_s``: a run's timeout when nobody asks for one; ``max_timeout_s``: the most
    anyone may ask (asking for more is an error; a definition's longer timeout is capped).
    ``max_text_chars``: the largest task, mail and result (characters).
    ``max_runs_per_tree``: the most runs one root's tree may ever admit (the root included,
    finished runs included, a restart not counted again); past it a spawn in the tree is
    refused naming the limit (None: no bound). Kept across a restore (recounted from the
    store) and on a cluster (the supervisor admits for every node).
    ``max_background_shells_per_run`` / ``max_background_shells``: the background shells
    (Bash's ``run_in_background``) one run, and all the runtime's runs, may hold at once (a
    shell holds its slot while it or any process it started runs); past either, a start is
    a tool error naming the limit and how to free a slot (``tools/shell_limits.py``).
    """

    max_depth: int = 3
    max_concurrency: int = 10
    per_agent: int = 5
    per_tier: dict[int, int] = msgspec.field(default_factory=dict)
    max_children: int = 5
    max_children_cap: int | None = None
    """None: ``CHILDREN_CAP`` (or ``max_children`` when that is higher)."""
    queue_bound: int = 20_000
    timeout_s: float = 300.0
    max_timeout_s: float = MAX_TIMEOUT_S
    token_budget: int | None = None
    max_turns: int = 50
    max_text_chars: int = 1_000_000
    """The largest task (or context), mail and result, in characters: past it the spawn, the
    mail or the run is refused with an error naming the size and the cap."""
    max_runs_per_tree: int | None = None
    max_background_shells_per_run: int | None = None
    """None: ``SHELLS_PER_RUN`` (16), or ``max_background_shells`` when that is lower (so
    that lowering the runtime's alone is not refused); set, at most ``max_background_shells``."""
    max_background_shells: int = SHELLS_PER_RUNTIME

    def __post_init__(self) -> None:
        for field in (
            "max_concurrency",
            "per_agent",
            "max_children",
            "queue_bound",
            "max_turns",
            "max_text_chars",
            "max_background_shells",
        ):
            value = getattr(self, field)
            if not _is_int(value) or value < 1:
                raise LimitError(f"limit {field} must be a positive integer, got {shown(value)}")
        cap = self.max_children_cap
        if cap is not None and (not _is_int(cap) or cap < 1):
            raise LimitError(f"limit max_children_cap must be a positive integer, got {shown(cap)}")
        if cap is not None and self.max_children > cap:
            raise LimitError(
                f"limit max_children ({shown(self.max_children)}) is above max_children_cap"
                f" ({shown(self.max_children_cap)}); raise the cap too"
            )
        _check_shells(self.max_background_shells_per_run, self.max_background_shells)
        if not _is_int(self.max_depth) or self.max_depth < 0:
            raise LimitError(
                f"limit max_depth must be >= 0 (a whole number), got {shown(self.max_depth)}"
            )
        if not isinstance(self.per_tier, dict):
            raise LimitError(
                f"limit per_tier must be a dict of tier: runs, got {shown(self.per_tier)}"
            )
        for tier, n in self.per_tier.items():
            if not _is_int(tier):
                raise LimitError(f"limit per_tier: a tier must be an integer, got {shown(tier)}")
            if not _is_int(n) or n < 1:
                raise LimitError(
                    f"limit per_tier[{shown(tier)}] must be a positive integer, got {shown(n)}"
                )
        if not _is_number(self.max_timeout_s) or not 0 < self.max_timeout_s <= MAX_TIMEOUT_S:
            raise LimitError(
                f"limit max_timeout_s must be in (0, {MAX_TIMEOUT_S:g}],"
                f" got {shown(self.max_timeout_s)}"
            )
        if not _is_number(self.timeout_s) or not 0 < self.timeout_s <= self.max_timeout_s:
            raise LimitError(
                f"limit timeout_s must be in (0, {self.max_timeout_s:g}],"
                f" got {shown(self.timeout_s)}"
            )
        if self.token_budget is not None and (
            not _is_int(self.token_budget) or self.token_budget < 1
        ):
            raise LimitError(
                f"limit token_budget must be a positive integer, got {shown(self.token_budget)}"
            )

        runs = self.max_runs_per_tree
        if runs is not None and (not _is_int(runs) or runs < 1):
            raise LimitError(
                f"limit max_runs_per_tree must be a positive integer, got {shown(runs)}"
            )

    def children_for(self, requested: int | None) -> int:
        """Live children a parent may have: its definition's ``maxChildren`` up to the cap,
        else the default."""
        if requested is None:
            return self.max_children
        cap = self.max_children_cap
        return min(requested, cap if cap is not None else max(CHILDREN_CAP, self.max_children))

    def background_shells_per_run(self) -> int:
        """The background shells one run may hold (``max_background_shells_per_run``)."""
        per_run = self.max_background_shells_per_run
        return min(SHELLS_PER_RUN, self.max_background_shells) if per_run is None else per_run

    def timeout_for(self, *requested: float | None) -> float:
        """The tightest of the requested timeouts (the default when none is), capped at the
        maximum: a request may ask for more than the default, never more than the maximum."""
        given = [t for t in requested if t is not None and t > 0]
        timeout = min(given) if given else self.timeout_s
        return min(timeout, self.max_timeout_s)


def _check_shells(per_run: int | None, in_all: int) -> None:
    """A run may not be allowed more background shells than all runs together."""
    if per_run is None:
        return
    if not _is_int(per_run) or per_run < 1:
        raise LimitError(
            f"limit max_background_shells_per_run must be a positive integer, got {shown(per_run)}"
        )
    if per_run > in_all:
        raise LimitError(
            f"limit max_background_shells_per_run ({shown(per_run)}) is above"
            f" max_background_shells ({shown(in_all)}); raise that too"
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def shown(value: object) -> str:
    """``value`` as an error names it: its ``repr``, but an int past every float by its size
    (its repr raises past Python's digits limit, ``ValueError`` naming nothing, and would fill
    the error)."""
    if isinstance(value, int) and not -sys.float_info.max <= value <= sys.float_info.max:
        return "an int above 1e+308" if value > 0 else "an int below -1e+308"
    return repr(value)
