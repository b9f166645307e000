"""``Runtime.fan_out`` and ``Runtime.synthesize``: several runs, one synthesized answer, for
programs that embed the runtime (the Runtime hands both to its part ``Syntheses``).

Why here, next to _runtime.py: it only uses the Runtime's public entry points (``spawn``,
``RunHandle.result``, ``wait_ended``), handed in as functions (the Runtime type is not
imported: that was an import cycle), and the pure strategies of ``supervision.synthesis``. Parallel
strategies start every run at once (the runtime's concurrency limits and queue apply) and
wait for all; ``chain`` runs them one after another, each getting the previous output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from subagents.messages import AgentTask, Outcome, RunRecord
from subagents.runtime._run_handle import RunHandle, check_timeout
from subagents.runtime._run_waits import RunWaits
from subagents.supervision.core import AdmissionError
from subagents.supervision.limits import Limits
from subagents.supervision.synthesis import (
    Item,
    Synthesis,
    check_strategy,
    outcome_value,
    synthesize,
)


def chain_task(task: str, previous: str | None) -> str:
    """The task of a chain link: ``{input}`` in the task is replaced by the previous output,
    else the output is appended as an ``<input>`` element."""
    if previous is None:
        return task.replace("{input}", "")
    if "{input}" in task:
        return task.replace("{input}", previous)
    return f"{task}\n\n<input>\n{previous}\n</input>"


Spawn = Callable[..., RunHandle]
"""``Runtime.spawn``: (agent, task, **spawn options) -> the run's handle."""


def fan_out(
    spawn: Spawn,
    max_timeout_s: float,
    jobs: Sequence[AgentTask],
    *,
    strategy: str = "vote",
    threshold: float = 0.5,
    scorer: Callable[[Any], float] | None = None,
    weights: Mapping[str, float] | None = None,
    wait: float | None = None,
    **spawn_options: Any,
) -> Synthesis:
    """Run ``jobs`` and combine their results by ``strategy`` (see ``supervision.synthesis``).

    ``spawn_options`` (context, timeout, token_budget, model...) apply to every run; without
    ``wait``, each run is waited for up to ``max_timeout_s`` (the longest timeout a run may
    have) and 30 s more. A run
    that is refused, fails or times out is reported in ``Synthesis.failed``, never dropped
    silently; ``chain`` stops at the first link that does not complete.
    """
    check_strategy(strategy, scorer)
    for i, job in enumerate(jobs):
        if not (
            isinstance(job, tuple | list) and len(job) == 2 and all(isinstance(x, str) for x in job)
        ):
            raise TypeError(f"jobs[{i}] must be an (agent, task) pair of strings, got {job!r}")
    budget = wait if wait is not None else max_timeout_s + 30.0
    weight_of = dict(weights or {})
    items: list[Item] = []
    if strategy == "chain":
        previous: str | None = None
        for agent, task in jobs:
            item, outcome = _run_one(
                spawn, agent, chain_task(task, previous), budget, weight_of, spawn_options
            )
            items.append(item)
            if outcome is None or not outcome.ok:
                break
            previous = outcome.result or ""
    else:
        handles: list[tuple[str, Any]] = []
        for agent, task in jobs:
            try:
                handles.append((agent, spawn(agent, task, **spawn_options)))
            except Exception as exc:  # refused: reported, the others still run
                handles.append((agent, exc))
        for agent, handle in handles:
            if isinstance(handle, Exception):
                items.append(_refused(agent, handle, weight_of))
                continue
            try:
                outcome = handle.result(timeout=budget)
            except AdmissionError as exc:  # refused by the runtime's state, on the handle
                items.append(_refused(agent, exc, weight_of))
                continue
            items.append(_item(agent, outcome, weight_of))
    return synthesize(strategy, items, threshold=threshold, scorer=scorer, weights=weights)


def synthesize_runs(
    wait_ended: Callable[[Sequence[str], float | None], Mapping[str, Outcome]],
    read_run: Callable[[str], RunRecord | None],
    max_timeout_s: float,
    run_ids: Sequence[str],
    strategy: str,
    *,
    threshold: float = 0.5,
    scorer: Callable[[Any], float] | None = None,
    weights: Mapping[str, float] | None = None,
    wait: float | None = None,
) -> Synthesis:
    """``Runtime.synthesize``: wait up to ``wait`` seconds for ``run_ids`` to end, then
    combine their outcomes (in the order given) by ``strategy``; see ``synthesis_of``."""
    check_strategy(strategy, scorer)
    budget = wait if wait is not None else max_timeout_s + 30.0
    ended = wait_ended(run_ids, budget)
    runs = [(r, read_run(r), ended.get(r)) for r in run_ids]
    return synthesis_of(strategy, runs, threshold=threshold, scorer=scorer, weights=weights)


class Syntheses:
    """``Runtime.fan_out`` and ``Runtime.synthesize``: the Runtime's part that combines the
    results of several runs into one answer, given its entry points as functions (``spawn``;
    ``waits``, for the ids a synthesis is given and the outcomes it waits for; ``read_run``)
    and the runtime's ``limits`` (a wait defaults to the longest timeout a run may have)."""

    def __init__(
        self,
        spawn: Spawn,
        waits: RunWaits,
        read_run: Callable[[str], RunRecord | None],
        limits: Limits,
    ) -> None:
        self.spawn = spawn
        self.waits = waits
        self.read_run = read_run
        self.limits = limits

    def synthesize(
        self,
        run_ids: Iterable[str | RunHandle],
        strategy: str,
        threshold: float,
        scorer: Callable[[Any], float] | None,
        weights: Mapping[str, float] | None,
        wait: float | None,
    ) -> Synthesis:
        """``Runtime.synthesize``: the runs checked, then ``synthesize_runs``."""
        check_strategy(strategy, scorer)
        ids = self.waits.run_ids(run_ids, "synthesize")
        return synthesize_runs(
            self.waits.wait_ended, self.read_run, self.limits.max_timeout_s, ids, strategy,
            threshold=threshold, scorer=scorer, weights=weights, wait=check_timeout(wait, "wait")
        )  # fmt: skip

    def fan_out(
        self,
        jobs: Sequence[AgentTask],
        strategy: str,
        threshold: float,
        scorer: Callable[[Any], float] | None,
        weights: Mapping[str, float] | None,
        wait: float | None,
        spawn_options: Mapping[str, Any],
    ) -> Synthesis:
        """``Runtime.fan_out``: ``fan_out`` with the runtime's ``spawn``."""
        return fan_out(
            self.spawn, self.limits.max_timeout_s, jobs, strategy=strategy, threshold=threshold,
            scorer=scorer, weights=weights, wait=wait, **spawn_options
        )  # fmt: skip


def synthesis_of(
    strategy: str,
    runs: Sequence[tuple[str, RunRecord | None, Outcome | None]],
    *,
    threshold: float = 0.5,
    scorer: Callable[[Any], float] | None = None,
    weights: Mapping[str, float] | None = None,
) -> Synthesis:
    """The synthesis of runs that already exist: ``runs`` are (run id, its record, its
    outcome or None when it had not ended), in the order given; each is one input, as a
    fan-out job's run would be."""
    weight_of = dict(weights or {})
    items: list[Item] = []
    for run_id, record, outcome in runs:
        agent = record.agent if record is not None else ""
        if outcome is None:
            status = record.status if record is not None else "gone"
            items.append(
                Item(
                    source=run_id,
                    agent=agent,
                    weight=float(weight_of.get(agent, 1.0)),
                    ok=False,
                    error=f"not ended ({status}) when the synthesis was made",
                )
            )
        else:
            items.append(_item(agent, outcome, weight_of))
    return synthesize(strategy, items, threshold=threshold, scorer=scorer, weights=weights)


def _run_one(
    spawn: Spawn,
    agent: str,
    task: str,
    wait: float,
    weights: Mapping[str, float],
    options: Mapping[str, Any],
) -> tuple[Item, Outcome | None]:
    try:
        handle = spawn(agent, task, **options)
    except Exception as exc:
        return _refused(agent, exc, weights), None
    try:
        outcome = handle.result(timeout=wait)
    except AdmissionError as exc:  # refused by the runtime's state, on the handle
        return _refused(agent, exc, weights), None
    return _item(agent, outcome, weights), outcome


def _refused(agent: str, exc: Exception, weights: Mapping[str, float]) -> Item:
    return Item(
        source=f"refused:{agent}",
        agent=agent,
        weight=float(weights.get(agent, 1.0)),
        ok=False,
        error=f"refused: {exc}",
    )


def _item(agent: str, outcome: Outcome, weights: Mapping[str, float]) -> Item:
    return Item(
        source=outcome.run_id,
        agent=agent,
        weight=float(weights.get(agent, 1.0)),
        value=outcome_value(outcome.result, outcome.typed) if outcome.ok else None,
        ok=outcome.ok,
        error=None if outcome.ok else f"{outcome.status}: {outcome.error}",
    )
