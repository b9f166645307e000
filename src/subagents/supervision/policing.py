"""The supervision policies as SupervisorCore sees them: budgets, restarts, retries,
``fail_parent``, context handed down.

Why a mixin in its own module: SupervisorCore owns admission, delivery and stops; these
policies hook into five of its moments (admitting a run, a step's usage, a run ending in
error, an outcome being delivered, a tree being forgotten). Keeping the policy decisions
here keeps core.py's edits to one call per moment, and the decisions themselves live in
plain classes (``BudgetBook``, ``RestartIntensity``, ``policy_of``, ``handdown``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Checkpoint,
    EventKind,
    Outcome,
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
from subagents.supervision.policies import (
    Policy,
    PolicyError,
    on_failure_value,
    policy_of,
    shared_keys_value,
)
from subagents.supervision.restarts import RestartIntensity, abnormal

if TYPE_CHECKING:
    from subagents.store.base import RunStore
    from subagents.supervision.core import Effect, RunState
    from subagents.supervision.limits import Limits
    from subagents.supervision.tree import RunTree


class PolicyRefused(Exception):
    """A spawn refused by a policy (budget, bad setting, missing shared key)."""


@dataclass(frozen=True)
class ScheduleRestart:
    """Effect: tell the supervisor ``RestartDue(run_id)`` after ``delay_s`` (one timer)."""

    run_id: str
    delay_s: float


@dataclass(frozen=True)
class RestartDue:
    """The backoff of a restarting run is over (timer service -> supervisor)."""

    run_id: str


@dataclass
class _RunPolicy:
    policy: Policy
    max_retries: int
    seed: Checkpoint | None
    restarting: bool = False


FAILURES_THAT_FAIL_PARENT = frozenset(
    {RunStatus.FAILED, RunStatus.TIMED_OUT, RunStatus.BUDGET_EXCEEDED}
)
"""A child ending so makes a ``fail_parent`` parent fail; a cancelled child does not (its
parent, or someone above, stopped it)."""


class PolicyHooks:
    """Mixed into SupervisorCore: the policy side of its decisions."""

    if TYPE_CHECKING:
        runs: dict[str, RunState]
        tree: RunTree
        store: RunStore
        limits: Limits
        clock: Callable[[], float]
        _effects: list[Effect]

        def live(self, run_id: str) -> RunState | None: ...
        def _update(self, state: RunState, **changes: Any) -> None: ...
        def _emit(self, kind: EventKind, state: RunState, **data: Any) -> None: ...
        def _start(self, state: RunState) -> None: ...
        def _restart_when_slotted(self, state: RunState) -> None: ...
        def _cancel_subtree(self, state: RunState, reason: str) -> list[str]: ...
        def _finish(
            self,
            state: RunState,
            status: RunStatus,
            *,
            result: str | None = None,
            error_kind: str | None = None,
            error: str | None = None,
        ) -> None: ...
        def _handling(self) -> Any: ...

    def _init_policies(self, clock: Callable[[], float], rng: random.Random | None) -> None:
        self.budgets = BudgetBook()
        self.restarts = RestartIntensity(clock=clock, rng=rng)
        self._policy: dict[str, _RunPolicy] = {}

    # ---- admission ---------------------------------------------------------------------------

    def _admit_policies(
        self, req: SpawnRequest, spec: AgentSpec, parent: RunState | None, run_id: str
    ) -> dict[str, Any]:
        """Check and register a new run's policies; the RunRecord fields they set.

        Raises ``PolicyRefused`` (a bad setting, a missing shared key, no budget left). Call
        after every other admission check; ``_forget_policies`` undoes it.
        """
        label = f"{parent.record.agent} ({parent.record.run_id})" if parent is not None else ""
        try:
            policy = policy_of(spec)
            if req.max_retries is not None and (
                isinstance(req.max_retries, bool)
                or not isinstance(req.max_retries, int)
                or req.max_retries < 0
            ):
                raise PolicyError(f"max_retries must be an integer >= 0, got {req.max_retries!r}")
            on_failure = policy.on_failure
            if req.on_failure is not None:
                on_failure = on_failure_value("on_failure", req.on_failure)
            share = shared_keys_value("share", list(req.share))
            if parent is not None:
                shared = shared_for_child(
                    parent.record.shared, (*policy.shared_keys, *share), parent_label=label
                )
            else:
                shared = _json_dict(req.shared or {})
        except (PolicyError, HandDownError) as exc:
            raise PolicyRefused(str(exc)) from None
        try:
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
                self.store.load_checkpoint(parent.record.run_id),
                run_id=run_id,
                first_text=first_message_text(req.task, req.context, shared),
            )
        max_retries = policy.max_retries if req.max_retries is None else req.max_retries
        self._policy[run_id] = _RunPolicy(policy=policy, max_retries=max_retries, seed=seed)
        return {
            "token_budget": budget.tokens,
            "cost_budget_usd": budget.cost_usd,
            "on_failure": on_failure,
            "shared": shared,
        }

    def _seed(self, run_id: str) -> Checkpoint | None:
        """The conversation a fresh run starts with (inherited messages), if any."""
        entry = self._policy.get(run_id)
        return entry.seed if entry is not None else None

    # ---- budgets -----------------------------------------------------------------------------

    def _entry(self, state: RunState) -> _RunPolicy | None:
        """The policy entry of a run; built from its record and definition for a run this
        core did not admit (restored from the store after a restart of the process)."""
        run_id = state.record.run_id
        entry = self._policy.get(run_id)
        if entry is not None:
            return entry
        try:
            policy = policy_of(state.spec)
        except PolicyError:
            return None
        entry = _RunPolicy(policy=policy, max_retries=policy.max_retries, seed=None)
        self._policy[run_id] = entry
        return entry

    def _register_restored(self, run_id: str) -> None:
        """Put a restored run (and its ancestors) in the budget ledger, from their records."""
        chain: list[RunState] = []
        current = self.runs.get(run_id)
        while current is not None and not self.budgets.known(current.record.run_id):
            chain.append(current)
            parent_id = current.record.parent_run_id
            current = self.runs.get(parent_id) if parent_id is not None else None
        for state in reversed(chain):
            record = state.record
            spent = Usage()
            for r in self.tree.subtree(record.run_id):
                other = self.runs.get(r)
                if other is not None:
                    spent = spent + other.record.usage
            self.budgets.restore(
                record.run_id,
                record.parent_run_id,
                Budget(tokens=record.token_budget, cost_usd=record.cost_budget_usd),
                spent,
            )

    def _charge(self, msg: StepTaken) -> None:
        """Roll a step's usage up the tree; stop every run now over its budget."""
        if self.budgets.known(msg.run_id):
            over = self.budgets.charge(msg.run_id, msg.usage)
        else:  # restored: its records' usage (this step included) is what it has spent
            self._register_restored(msg.run_id)
            chain = [msg.run_id, *self.tree.ancestors(msg.run_id)]
            over = [r for r in chain if self.budgets.over(r)]
        for run_id in over:
            state = self.live(run_id)
            if state is not None:
                self._over_budget(state)

    def _over_budget(self, state: RunState) -> None:
        from subagents.supervision.core import StopAgent

        record = state.record
        why = f"{record.agent} {self.budgets.describe_over(record.run_id)}"
        for child_id in reversed(self.tree.children(record.run_id)):
            child = self.live(child_id)
            if child is not None:
                self._cancel_subtree(child, f"its ancestor {why}")
        self._finish(state, RunStatus.BUDGET_EXCEEDED, error_kind="budget", error=why)
        self._effects.append(StopAgent(record.run_id))

    # ---- restarts and retries ----------------------------------------------------------------

    def _try_again(self, state: RunState, msg: RunFinished) -> RunFinished | None:
        """A run ended in error: restart it (``transient``), retry it (``on_failure: retry``),
        or let it fail. None when it goes again; else the report to finish it with."""
        record = state.record
        entry = self._entry(state)
        if entry is None:
            return msg
        decision = self.restarts.decide(record.run_id, entry.policy, msg.error_kind)
        retry = False
        if not decision.restart:
            retry = record.on_failure == "retry" and record.retries < entry.max_retries
            if not retry:
                if entry.policy.restart == "transient" and abnormal(msg.error_kind):
                    return msgspec.structs.replace(
                        msg, error=f"{msg.error} (not restarted: {decision.reason})"
                    )
                return msg
        state.unread_mail.update(msg.unread_mail)
        entry.restarting = True
        if retry:
            # A retry starts from scratch: the old attempt's children go with it.
            for child_id in reversed(self.tree.children(record.run_id)):
                child = self.live(child_id)
                if child is not None:
                    self._cancel_subtree(child, f"its parent {record.agent} is retrying")
            attempt = record.retries + 1
            delay = self.restarts.backoff(entry.policy, attempt)
            self._update(state, retries=attempt, steps=0)
            state.from_scratch = True
        else:
            # A restart resumes from the checkpoint: children keep running and report to it.
            attempt, delay = decision.attempt, decision.delay_s
            self._update(state, restarts=record.restarts + 1)
        self._emit(
            EventKind.RESTARTED,
            state,
            attempt=attempt,
            mode="retry" if retry else "restart",
            delay_s=round(delay, 4),
            error_kind=msg.error_kind,
            error=msg.error,
        )
        self._effects.append(ScheduleRestart(record.run_id, delay))
        return None

    def restart_due(self, run_id: str) -> list[Effect]:
        """The backoff is over: start the run again (from its checkpoint when it has steps)."""
        with self._handling():
            state = self.live(run_id)
            entry = self._policy.get(run_id)
            if state is None or entry is None or not entry.restarting:
                return self._effects
            entry.restarting = False
            state.checkpoint = entry.seed if state.record.steps == 0 else None
            self._restart_when_slotted(state)
            return self._effects

    def _restarting(self, run_id: str) -> bool:
        """Between a failure and its restart (no actor: nothing to ask of it meanwhile)."""
        entry = self._policy.get(run_id)
        return entry is not None and entry.restarting

    # ---- failure handling --------------------------------------------------------------------

    def _fail_parent(self, state: RunState, outcome: Outcome) -> bool:
        """A ``fail_parent`` child failed: its parent fails with the child's reason. True
        when the parent was failed (the child's outcome then goes nowhere else)."""
        record = state.record
        if record.on_failure != "fail_parent" or outcome.status not in FAILURES_THAT_FAIL_PARENT:
            return False
        parent = self.live(record.parent_run_id or "")
        if parent is None:
            return False
        from subagents.supervision.core import StopAgent

        reason = f"child {record.agent} ({record.run_id}) {outcome.status}"
        if outcome.error:
            reason += f": {outcome.error}"
        report = RunFinished(run_id=parent.record.run_id, error_kind="child_failed", error=reason)
        again = self._try_again(parent, report)
        if again is not None:
            self._finish(parent, RunStatus.FAILED, error_kind="child_failed", error=again.error)
        self._effects.append(StopAgent(parent.record.run_id))
        return True

    def _forget_policies(self, run_ids: Iterable[str]) -> None:
        ids = list(run_ids)
        self.budgets.forget(ids)
        for run_id in ids:
            self._policy.pop(run_id, None)
            self.restarts.forget(run_id)


def _json_dict(shared: Any) -> dict[str, Any]:
    """Shared context as plain JSON data (it is stored, and copied to children)."""
    if not isinstance(shared, dict) or not all(isinstance(k, str) for k in shared):
        raise PolicyError(f"shared context must be a mapping of names to values, got {shared!r}")
    try:
        decoded: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(shared))
    except (TypeError, msgspec.EncodeError) as exc:
        raise PolicyError(f"shared context must be JSON data: {exc}") from None
    return decoded
