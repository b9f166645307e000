"""Several processes of one benchmark read as one table row: the median process's, with the range.

A ratio near its goal's line is not one process's reading: fresh interpreters of the same tree
moved +-0.15x between them (session 14: ping-pong in memory read 0.67x in the quiet round and
0.84x as the median of 5 interleaved pairs). ``run_all.py --processes N`` runs the short ratio
benchmarks (``SHORT``) N times per round, each a fresh interpreter measuring its own anchor, and
this module folds their rows into one per goal:

- the row shown is ONE process's row, whole (figure, anchor, ratio and verdict of the same
  process, so they agree with each other): the process whose ratio is the median. With an even
  count there is no middle process, and the worse of the two middle ones is shown (by the
  direction of the row's target: ``>``/``>=`` higher is better, ``<``/``<=`` lower is better;
  a row without a target, not a goal, takes its benchmark's first goal's direction: their
  first ratios are of the same kind, ours / the anchor), so an even count never flatters;
- its ratio cell adds the median's place and the range over every process, and its load cell
  the load of every process (``**loaded**`` when any was taken above the line);
- a row without a ratio (``-``) is the row of the process shown for the benchmark's first row
  with one (its headline), so the rows of one benchmark come from one process where they can;
- a process that failed is left out of the median and said in every row of its benchmark, and
  a goal those that finished met reads ``met by K of N processes (the others failed)`` (after
  any qualifier of its own: ``met in a loaded round only by K of N ...``).

Pure functions of the rows the row makers built: tested with fixed inputs
(``tests/benchmarks/test_run_all_processes.py``), no timing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Row = tuple[str, ...]

SHORT = ("mail", "spawn", "fanout")
"""The benchmarks whose goal rows are ratios of a short measurement to an anchor taken in the
same process (ping-pong in memory and durable, ahead of autogen-core, trivial spawn, fan-out):
the ones ``--processes`` repeats. The long ones (scale, the cluster) stay one per round."""

_RATIO = re.compile(r"(\d+(?:\.\d+)?)x")


def ratio_of(row: Row) -> float | None:
    """The first ratio of a row's ratio cell (``0.6701x``, ``p50 2.21x, p99 ...``,
    ``1.29x ideal``); None for a row without one (``-``)."""
    found = _RATIO.search(row[3])
    return float(found.group(1)) if found else None


def higher_is_better(target: str) -> bool | None:
    """The direction of a goal from its target cell (``>= 0.7x``, ``<= 1.5x``, ``< 1x``);
    None for a cell that states none (the notes of a row that is not a goal)."""
    cell = target.lstrip()
    if cell.startswith(">"):
        return True
    if cell.startswith("<"):
        return False
    return None


def middle(values: Sequence[float], higher_better: bool | None) -> int:
    """The index of the median value; with an even count, the worse of the two middle ones
    (the lower when higher is better or the direction is unknown, the higher when lower is
    better)."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    half = len(order) // 2
    if len(order) % 2:
        return order[half]
    low, high = order[half - 1], order[half]
    return high if higher_better is False else low


def _place(count: int) -> str:
    return f"median of {count}" if count % 2 else f"the worse middle one of {count}"


def _fold(
    rows: list[tuple[int, Row]], shown: int, median: bool, total: int, failed: Sequence[str]
) -> Row:
    """One row from the same row of several processes: process ``shown``'s (the ``median``
    one of its ratios, or the headline's), its ratio cell with the range and its load cell
    with every process's load."""
    row = next(row for process, row in rows if process == shown)
    values = [value for _, r in rows if (value := ratio_of(r)) is not None]
    ratio_cell = row[3]
    if median and len(rows) > 1:
        ratio_cell += f" ({_place(len(values))} processes; range {min(values):g}x-{max(values):g}x)"
    elif len(rows) > 1:
        ratio_cell += f" (process {shown + 1} of {total}, the headline's middle one)"
    if len(rows) < total - len(failed):
        ratio_cell += f"; in {len(rows)} of {total} processes"
    verdict = row[5]
    if failed:
        ratio_cell += f"; {len(failed)} of {total} processes failed: {failed[0]}"
        if verdict.startswith("met"):  # not met by the processes that happened to finish
            verdict += f" by {total - len(failed)} of {total} processes (the others failed)"
    loads = ", ".join(r[6] for _, r in rows)
    load_cell = f"{row[6]} (each: {loads})" if len(rows) > 1 else row[6]
    if "loaded" in loads and "loaded" not in row[6]:
        load_cell = load_cell.replace(" (each:", " (some **loaded**; each:", 1)
    return (*row[:3], ratio_cell, row[4], verdict, load_cell)


def fold(per_process: Sequence[list[Row] | None], failed: Sequence[str]) -> list[Row]:
    """The rows of one benchmark's processes (None for a process that failed, whose reason is
    in ``failed``) as one row per label, in the order they first appear."""
    total = len(per_process)
    by_label: dict[str, list[tuple[int, Row]]] = {}
    for process, made in enumerate(per_process):
        for row in made or ():
            by_label.setdefault(row[0], []).append((process, row))
    headline: int | None = None
    shown: dict[str, int] = {}
    targets = (higher_is_better(taken[0][1][4]) for taken in by_label.values())
    way = next((way for way in targets if way is not None), None)  # the benchmark's goal's
    for label, taken in by_label.items():
        measured = [(p, value) for p, row in taken if (value := ratio_of(row)) is not None]
        if measured and len(measured) == len(taken):
            own = higher_is_better(taken[0][1][4])
            pick = middle([value for _, value in measured], way if own is None else own)
            shown[label] = measured[pick][0]
            headline = shown[label] if headline is None else headline
    folded: list[Row] = []
    for label, taken in by_label.items():
        present = [p for p, _ in taken]
        fallback = headline if headline is not None and headline in present else present[0]
        folded.append(_fold(taken, shown.get(label, fallback), label in shown, total, failed))
    return folded
