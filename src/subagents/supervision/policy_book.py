"""PolicyBook: the supervision policies of each run: budgets, restarts, retries,
``fail_parent``, context handed down.

Why apart from the lifecycle: these are decisions (may this run spawn with that budget? does
this failure restart it, retry it, or end it? which runs are over budget now?), answered
from plain ledgers (``BudgetBook``, ``RestartIntensity``, ``policy_of``, ``handdown``). The
lifecycle asks and acts: it ends, restarts or cancels runs; this book never does.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass
from typing import Any

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Checkpoint,
    OnFailure,
    RunFinished,
    RunStatus,
    SpawnRequest,
    StepTaken,
    Usage,
)
from subagents.supervision.budgets import Budget, BudgetBook, BudgetRefused
from subagents.supervision.handdown import (
    HandDownError,
    first_message_text,
    inherited_conversation,
    shared_for_child,
)
from subagents.supervision.limits import Limits
from subagents.supervision.policy_settings import (
    Policy,
    PolicyError,
    on_failure_value,
    policy_of,
    shared_keys_value,
)
from subagents.supervision.requests import max_retries_problem
from subagents.supervision.restarts import RestartIntensity, abnormal
from subagents.supervision.run_entry import UNLIMITED, RunEntry
from subagents.supervision.runs import RunState, RunTable


class PolicyRefused(Exception):
    """A spawn refused by a policy (budget, bad setting, missing shared key)."""


class PolicyFields(msgspec.Struct, frozen=True):
    """The ``RunRecord`` fields a new run's policies set (``PolicyBook.admit``), passed by
    name, not a dict splatted into the record: ``**`` into a struct of ~35 fields cost more
    than the rest of the record's construction. A Struct, made in C (a ``NamedTuple``'s
    ``__new__`` was two calls of every spawn)."""

    token_budget: int | None
    cost_budget_usd: float | None
    on_failure: OnFailure
    shared: dict[str, Any]
    seed: Checkpoint | None
    """The conversation the fresh run starts with (inherited messages), if any."""


@dataclass(frozen=True)
class Again:
    """A run that ended in error goes again after ``delay_s``: retried from scratch
    (``retry``, its children cancelled) or restarted from its checkpoint (its children keep
    running and report to it)."""

    retry: bool
    attempt: int
    delay_s: float


FAILURES_THAT_FAIL_PARENT = frozenset(
    {RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.BUDGET_EXCEEDED}
)
"""A child ending so makes a ``fail_parent`` parent fail; a cancelled child does not (its
parent, or someone above, stopped it)."""


class PolicyBook:
    """The policy entry, the budget and the restart window of every run the supervisor
    holds: one ``RunEntry`` per run, in one dict the budget ledger and the restart window
    share (admitting a run is one insert, forgetting it one pop)."""

    def __init__(
        self,
        runs: RunTable,
        limits: Limits,
        clock: Callable[[], float],
        rng: random.Random | None = None,
    ) -> None:
        self.runs = runs
        self.limits = limits
        self._entries: dict[str, RunEntry] = {}
        self.entries = self._entries
        """Each run's entry by id: a batch's plain roots are entered here directly, their
        policy read once for the batch (``root_batch``: what ``admit`` enters for them)."""
        self.budgets = BudgetBook(self._entries)
        self.restarts = RestartIntensity(clock=clock, rng=rng, entries=self._entries)

    # ---- admission -------------------------------------------------------------------------

    def admit(
        self, req: SpawnRequest, spec: AgentSpec, parent: RunState | None, run_id: str
    ) -> PolicyFields:
        """Check and register a new run's policies; the RunRecord fields they set.

        Raises ``PolicyRefused`` (a bad setting, a missing shared key, no budget left). Call
        after every other admission check; ``forget`` undoes it.
        """
        label = f"{parent.record.agent} ({parent.run_id})" if parent is not None else ""
        try:
            policy = policy_of(spec)
            if req.max_retries is not None:  # (most requests: none, nothing to check)
                problem = max_retries_problem(req.max_retries)
                if problem is not None:
                    raise PolicyError(problem)
            on_failure = policy.on_failure
            if req.on_failure is not None:
                on_failure = on_failure_value("on_failure", req.on_failure)
            # (most requests share nothing: the checks of what they would share are skipped)
            share = shared_keys_value("share", list(req.share)) if req.share else ()
            if parent is not None:
                keys = (*policy.shared_keys, *share)  # (most children are handed none)
                shared = (
                    shared_for_child(parent.record.shared, keys, parent_label=label) if keys else {}
                )
            else:
                shared = _json_dict(req.shared) if req.shared else {}
        except (PolicyError, HandDownError) as exc:
            raise PolicyRefused(str(exc)) from None
        max_retries = policy.max_retries if req.max_retries is None else req.max_retries
        if parent is not None and _budgeted(parent) and not self.budgets.known(parent.run_id):
            # a restored parent spawning before its first step (a replay): in the ledger first
            self._register_restored(parent.run_id)
        try:
            budget = None
            if _no_budget(req, spec, policy, self.limits):
                if req.parent_run_id is None:
                    # (most runs: unlimited, nothing to work out; their entry made whole at once)
                    entry = RunEntry(policy=policy, max_retries=max_retries, budget=UNLIMITED)
                    self._entries[run_id] = entry
                    return PolicyFields(None, None, on_failure, shared, None)
                budget = self.budgets.grant_unlimited(run_id, req.parent_run_id)  # (most children)
            if budget is None:
                budget = self.budgets.grant(
                    run_id,
                    req.parent_run_id,
                    tokens=(req.token_budget, spec.token_budget, self.limits.token_budget),
                    cost_usd=(req.cost_budget_usd, policy.cost_budget_usd),
                    parent_label=label,
                )
        except (BudgetRefused, ValueError) as exc:
            raise PolicyRefused(str(exc)) from None
        inherit = policy.inherit_messages if req.inherit_messages is None else req.inherit_messages
        seed = None
        if inherit and parent is not None:
            seed = inherited_conversation(
                parent.saved,
                run_id=run_id,
                first_text=first_message_text(req.task, req.context, shared),
            )
        entry = self._entries[run_id]  # (registered by ``grant``)
        entry.policy, entry.max_retries, entry.seed = policy, max_retries, seed
        return PolicyFields(budget.tokens, budget.cost_usd, on_failure, shared, seed)

    def reseed(self, run_id: str, seed: Checkpoint) -> Checkpoint:
        """``seed`` as what the fresh run ``run_id`` (just admitted) starts with, a restart
        before its first step included: a continued run's conversation."""
        entry = self._entries.get(run_id)
        if entry is not None:
            entry.seed = seed
        return seed

    def entry(self, state: RunState) -> RunEntry | None:
        """The policy entry of a run (its ``policy`` set); built from its record and
        definition for a run this book did not admit (restored from the store after a
        restart of the process: the budget ledger may know it already)."""
        entry = self._entries.get(state.run_id)
        if entry is not None and entry.policy is not None:
            return entry
        try:
            policy = policy_of(state.spec)
        except PolicyError:
            return None
        if entry is None:
            entry = self._entries[state.run_id] = RunEntry()
        entry.policy, entry.max_retries = policy, policy.max_retries
        # a continued run restored before its first step: its saved checkpoint is its seed
        entry.seed = state.saved if state.record.continues is not None else None
        return entry

    # ---- budgets ---------------------------------------------------------------------------

    def charge(self, msg: StepTaken) -> list[str]:
        """Roll a step's usage up the tree; the runs now over their budget."""
        if self.budgets.known(msg.run_id):
            return self.budgets.charge(msg.run_id, msg.usage)
        # restored: its records' usage (this step included) is what it has spent
        self._register_restored(msg.run_id)
        chain = [msg.run_id, *self.runs.tree.ancestors(msg.run_id)]
        return [r for r in chain if self.budgets.over(r)]

    def why_over(self, state: RunState) -> str:
        return f"{state.record.agent} {self.budgets.describe_over(state.run_id)}"

    def _register_restored(self, run_id: str) -> None:
        """Put a restored run (and its ancestors) in the budget ledger, from their records."""
        chain: list[RunState] = []
        current = self.runs.get(run_id)
        while current is not None and not self.budgets.known(current.run_id):
            chain.append(current)
            current = self.runs.get(current.record.parent_run_id)
        for state in reversed(chain):
            record = state.record
            # its ended descendants' spend (not held again after a restore), then the held
            spent = self.runs.spent_before.pop(record.run_id, Usage())
            for r in self.runs.tree.subtree(record.run_id):
                other = self.runs.get(r)
                if other is not None:
                    spent = spent + other.record.usage
            self.budgets.restore(
                record.run_id,
                record.parent_run_id,
                Budget(tokens=record.token_budget, cost_usd=record.cost_budget_usd),
                spent,
            )

    # ---- restarts and retries --------------------------------------------------------------

    def again(self, state: RunState, report: RunFinished) -> Again | RunFinished:
        """A run ended in error: restart it (``transient``), retry it (``on_failure:
        retry``), or let it fail with ``report`` (its error says why it was not restarted)."""
        record = state.record
        entry = self.entry(state)
        if entry is None:
            return report
        policy = entry.policy
        assert policy is not None  # (``entry`` sets it)
        decision = self.restarts.decide(record.run_id, policy, report.error_kind)
        if decision.restart:
            entry.restarting = True
            return Again(retry=False, attempt=decision.attempt, delay_s=decision.delay_s)
        if record.on_failure == "retry" and record.retries < entry.max_retries:
            entry.restarting = True
            attempt = record.retries + 1
            return Again(
                retry=True, attempt=attempt, delay_s=self.restarts.backoff(policy, attempt)
            )
        if policy.restart == "transient" and abnormal(report.error_kind):
            return msgspec.structs.replace(
                report, error=f"{report.error} (not restarted: {decision.reason})"
            )
        return report

    def restart_due(self, run_id: str) -> RunEntry | None:
        """The entry of ``run_id`` if a restart of it is scheduled (and no longer is)."""
        entry = self._entries.get(run_id)
        if entry is None or not entry.restarting:
            return None
        entry.restarting = False
        return entry

    def restarting(self, run_id: str) -> bool:
        """Between a failure and its restart (no actor: nothing to ask of it meanwhile)."""
        entry = self._entries.get(run_id)
        return entry is not None and entry.restarting

    def held(self) -> Set[str]:
        """The ids of the runs this book holds an entry of: a read-only view, current until
        the next change (the runs held, ``RunTable.held``: forgotten with their tree)."""
        return self._entries.keys()

    def forget(self, run_ids: Iterable[str]) -> None:
        """Drop the runs' entries: their policies, budgets and restart windows, one pop each."""
        pop = self._entries.pop
        before = self.runs.spent_before  # (empty but after a restore of budgeted trees)
        for run_id in run_ids:
            pop(run_id, None)
            if before:
                before.pop(run_id, None)


def _no_budget(req: SpawnRequest, spec: AgentSpec, policy: Policy, limits: Limits) -> bool:
    """Whether a run asks no budget anywhere (its request, its definition, the limits): a
    root's then is unlimited, with nothing to work out (its entry made whole in ``admit``),
    and a child's too when no run above it holds one (``BudgetBook.grant_unlimited``)."""
    return (
        req.token_budget is None
        and req.cost_budget_usd is None
        and spec.token_budget is None
        and policy.cost_budget_usd is None
        and limits.token_budget is None
    )


def _json_dict(shared: Any) -> dict[str, Any]:
    """Shared context as plain JSON data (it is stored, and copied to children)."""
    if not isinstance(shared, dict) or not all(isinstance(k, str) for k in shared):
        raise PolicyError(f"shared context must be a mapping of names to values, got {shared!r}")
    try:
        decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(shared))
    except (TypeError, ValueError, RecursionError, msgspec.EncodeError) as exc:
        # checked before (requests.value_problem); a value it lets pass still fails here,
        # named, never out of the supervisor's handling
        raise PolicyError(f"shared context must be JSON data: {exc}") from None
    return decoded


def _budgeted(state: RunState) -> bool:
    """Whether ``state``'s record has a budget (a restored one enters the ledger late)."""
    return state.record.token_budget is not None or state.record.cost_budget_usd is not None
