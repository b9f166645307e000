"""The goals table's floor rows: under a goal, the least THIS design does, measured in the same run.

A goal's verdict says whether the runtime met its anchor; a floor row under it says whether
the runtime's design could, on this machine: the design's floor (its fixed cost with none of
the runtime's own Python; each script says what it includes and leaves out) read against the
same anchor and target. Its verdict is ``reachable by this design here`` when the floor meets
the target, ``**unreachable by this design here**`` when even it does not (the goal then needs
another design, or another machine's balance of Python to hand-offs: ``_balance.py``), and
its figure and ratio are the floor's own. A floor in seconds whose CPU alone is over its
target is unreachable as read (``BY_CPU``); one whose wall time only is says so
(``NOT_AT_THIS_LOAD``); ``run_all`` marks a floor's verdict taken loaded (``LOADED``). Pure
functions of a benchmark's JSON, so ``run_all``'s fold reads a floor row of several processes
as any other row.

- ping-pong in memory: ``least_mail`` (``_least_mail.py``) / raw pykka ask, ``>= 0.5x``;
- ping-pong durable: ``least_durable`` / the durable floor (a bare commit + a hand-off),
  ``>= 0.7x``;
- trivial spawn: ``least_run`` (``spawn.py``) / raw pykka start+ask+stop, ``<= 1.5x``;
- fan-out: ``least_fanout`` (``_least_fanout.py``) / the ideal, ``<= 1.1x``;
- 100,000 waiting runs started with ``spawn_many``: ``least_waiting`` (``_least_waiting.py``,
  batched); with one ``spawn`` each: ``least_one_spawn`` (the same, each run told on its own;
  from a result without it, the batched one: a bound below that path's own);
- closing them: ``least_close`` (``_least_close.py``).
"""

from __future__ import annotations

from typing import Any

Row = tuple[str, ...]
REACHABLE = "reachable by this design here"
UNREACHABLE = "**unreachable by this design here**"
BY_CPU = " (its CPU alone, as read in this run, is over the target)"
"""An unreachable floor whose CPU alone (the process's, every thread's, under one GIL) is over
a target in seconds: no quiet machine of this CPU brings its wall time under it, but for what
of that CPU runs outside the GIL on the other core (system calls), which a floor has little
of, and for a CPU reading that moves (the same floor read 4.19 s of CPU at load 14 and 5.04 s
at load 2-5): so the row says what was read, not "at any load"."""
NOT_AT_THIS_LOAD = "**not reached at this load** (its CPU alone is under the target)"
NOT_SETTLED_BATCHED = (
    "**not settled by this floor** (batched: it does less than one `spawn` each must, so its"
    " meeting the target says nothing of that path)"
)
"""A batched floor under the one-``spawn``-each goal that meets the target: a floor that does
less than the path must can show a goal unreachable (even it misses), never reachable."""
LOADED = "; taken loaded: rough"
"""Added by ``run_all`` to a floor's verdict taken above the load line (a loaded wall time
or ratio says little of a quiet one, either way)."""
FLOOR = "↳ this design's floor: "


def reach(flag: bool) -> str:
    return REACHABLE if flag else UNREACHABLE


def mail_floors(p: dict[str, Any], load: str) -> tuple[list[Row], list[Row]]:
    """The ping-pong's floor rows (in memory; durable), when ``mail.py`` measured them."""
    rows: list[Row] = []
    durable: list[Row] = []
    calls = p.get("work_by_role", {}).get("calls_per_mail", {})
    if "least_mail_ratio_to_raw_ask" in p:
        counted = ""
        if "least_mail" in calls and "memory" in calls:
            counted = (
                f" ({calls['least_mail']['all']:g} calls/mail; ours {calls['memory']['all']:g})"
            )
        r = p["least_mail_ratio_to_raw_ask"]
        rows.append(
            (
                FLOOR + "the least in-memory mail (bare actors, both agents on one thread as"
                " the dispatcher runs a ping-pong: one supervisor tell, a self ack;"
                " `_least_mail.py`)",
                f"{p['least_mail_msgs_per_s']:,.0f} msg/s{counted}",
                f"raw pykka ask ping-pong {p['raw_ask_msgs_per_s']:,.0f} msg/s",
                f"{r}x",
                ">= 0.5x",
                reach(r >= 0.5),
                load,
            )
        )
    if "least_durable_ratio_to_floor" in p:
        r = p["least_durable_ratio_to_floor"]
        durable.append(
            (
                FLOOR + "the least durable mail (the same, the sender's bare INSERT first)",
                f"{p['least_durable_msgs_per_s']:,.0f} msg/s",
                f"floor {p['floor_msgs_per_s']:,.0f} msg/s",
                f"{r}x",
                ">= 0.7x",
                reach(r >= 0.7),
                load,
            )
        )
    return rows, durable


def spawn_floor(f: dict[str, Any], target: str) -> list[Row]:
    """``spawn.py``'s ``least_run`` under the trivial spawn's goal."""
    least = f.get("least_run")
    if least is None:
        return []
    r = least["ratio_p50"]
    limit = float(target) if target.replace(".", "", 1).isdigit() else 1.5
    return [
        (
            FLOOR + "the least run (four hand-offs, the core's two decisions, one bare actor;"
            " `spawn.py` least_run)",
            f"{least['p50_ms']} ms",
            f"raw pykka start+ask+stop, reused thread {f['raw_pooled']['p50_ms']} ms",
            f"{r}x",
            f"<= {target}x",
            reach(r <= limit),
        )
    ]


def fanout_floor(f: dict[str, Any]) -> list[Row]:
    """``fanout.py``'s ``least_fanout`` under the fan-out's goal."""
    least = f.get("least_fanout")
    if least is None:
        return []
    return [
        (
            FLOOR + "central admission, bare (one serial supervisor actor, children on reused"
            " threads; `_least_fanout.py`)",
            f"makespan {least['makespan_s']} s, at most {least['max_concurrent']} at once",
            f"ideal {f['ideal_s']} s",
            f"{least['ideal_ratio']}x ideal",
            "<= 1.1x",
            reach(least["reachable"]),
        )
    ]


def _seconds_verdict(seconds: float, cpu_s: float, target: float) -> str:
    """A floor in seconds against a target: reached, unreachable even by its CPU alone, or
    only not reached at the load it was taken at."""
    if seconds < target:
        return REACHABLE
    return UNREACHABLE + BY_CPU if cpu_s >= target else NOT_AT_THIS_LOAD


def _least_waiting_row(least: dict[str, Any], what: str, target: float, load: str) -> Row:
    seconds = least["start_s"]
    return (
        FLOOR + what,
        f"{least['n']:,} started in {seconds} s (CPU {least['start_cpu_s']} s)",
        "-",
        "-",
        f"< {target:g} s",
        _seconds_verdict(seconds, least["start_cpu_s"], target),
        load,
    )


def one_spawn_floor(
    least: dict[str, Any] | None,
    goals: dict[str, Any],
    load: str,
    unbatched: dict[str, Any] | None = None,
) -> list[Row]:
    """The floor under the one-``spawn``-each start goal: ``scale.py``'s ``least_one_spawn``
    (``unbatched``: each run told on its own, as ``spawn`` tells it; measured in the
    one-``spawn`` side's process, whose ``load`` is given), the path's own floor, any
    verdict; without it (an older result), ``least_waiting``: batched, so a bound below what
    this design can do one ``spawn`` at a time: it can say unreachable (even it misses) or
    not reached at this load, never reachable (``NOT_SETTLED_BATCHED``)."""
    if "start_one_spawn" not in goals:
        return []
    target = goals["start_one_spawn"]["target"]
    if unbatched is not None:
        what = "the least waiting runs, each told on its own, unanswered (`_least_waiting.py`)"
        return [_least_waiting_row(unbatched, what, target, load)]
    if least is None:
        return []
    what = "the least waiting runs, batched (`_least_waiting.py`; below one `spawn` each's own)"
    row = _least_waiting_row(least, what, target, load)
    if row[5] == REACHABLE:
        row = (*row[:5], NOT_SETTLED_BATCHED, *row[6:])
    return [row]


def spawn_many_floor(least: dict[str, Any] | None, goals: dict[str, Any], load: str) -> list[Row]:
    """``scale.py``'s ``least_waiting`` under the ``spawn_many`` start goal (its anchor)."""
    if least is None:
        return []
    what = f"the least waiting runs, batches of {least['batch']} (`_least_waiting.py`)"
    return [_least_waiting_row(least, what, goals["start"]["target"], load)]


def close_floor(least: dict[str, Any] | None, goals: dict[str, Any], load: str) -> list[Row]:
    """``scale.py``'s ``least_close`` under the close goal."""
    if least is None or "close" not in goals:
        return []
    seconds, cpu_s, target = least["close_s"], least["close_cpu_s"], goals["close"]["target"]
    return [
        (
            FLOOR + "the least close (a serial supervisor ending every waiting run in one"
            " pass: its record ended, its end and end event kept, its actor told to stop;"
            " then the dispatcher closed; `_least_close.py`)",
            f"{least['n']:,} closed in {seconds} s (CPU {cpu_s} s)",
            "-",
            "-",
            f"< {target:g} s",
            _seconds_verdict(seconds, cpu_s, target),
            load,
        )
    ]
