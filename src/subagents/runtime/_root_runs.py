"""RootRuns: how a Runtime starts a root run, or takes hold of one it did not start.

Why apart from the Runtime: a root run's request is checked at once by the supervisor's own
rules (``supervision.requests``, the agent among the current definitions), its waiter is
registered before the supervisor hears of it (so no outcome can land unseen), and on every
way out (refused, closed, timed out) the waiter is dropped again. A request the caller
waits for (``spawn_many``, ``continue_run``) and the supervisor did not take in time is
withdrawn, nothing of it started (``actors/ask_claims``). ``spawn`` and ``run`` TELL the
request and do not wait for its admission: the spawn enters the window of spawns not
decided yet first (``_spawn_window``: bounded; what reads the store waits there for the
decision), and a refusal that depends on the runtime's state (a full queue, a policy, the
store) reaches the waiter. Attaching registers the waiter before reading the store, for the
same reason. That ordering is the whole point, and it is kept here in one place; the
Runtime keeps the public ``spawn``, ``run`` and ``attach``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import msgspec

from subagents.actors.supervisor_client import TAKEN_GRACE, AskOverdue, AskRevoked
from subagents.definitions.spec import AgentSpec
from subagents.messages import Outcome, SpawnMany, SpawnReply, SpawnRequest, new_id
from subagents.runtime._root_waiters import RootWaiters, Waiter
from subagents.runtime._run_handle import check_timeout
from subagents.runtime._supervisor_asks import RuntimeClosed, SupervisorRequests
from subagents.store.base import RunStore
from subagents.supervision.admission_checks import unknown_agent
from subagents.supervision.core import AdmissionError
from subagents.supervision.limits import Limits
from subagents.supervision.requests import option_type_problem, policy_problem, request_problem


class RootRuns:
    """The root runs of one runtime: ``roots`` holds their waiters (and the window of spawns
    told); ``agents()`` the current definitions by name."""

    def __init__(
        self,
        roots: RootWaiters,
        requests: SupervisorRequests,
        limits: Limits,
        store: RunStore,
        agents: Callable[[], Mapping[str, AgentSpec]],
    ) -> None:
        self.roots = roots
        self.requests = requests
        self.limits = limits
        self.store = store
        self.agents = agents
        self.ask_timeout = 30.0
        """How long ``continue_run`` and ``spawn_many`` wait for the supervisor to take their
        request (``spawn_many``: 2 ms more per job) before withdrawing it, nothing started."""
        self.taken_grace = TAKEN_GRACE
        """How long a request the supervisor took is waited for past that: then a
        ``TimeoutError`` says its runs may still start, and their ids."""
        self.approvals_in_store = False
        """The runtime keeps its roots' asks in the store (``Runtime(approve="store")``): so
        does every run of their trees, hosted here or, after a crash, by another runtime."""

    def check(self, request: SpawnRequest) -> None:
        """What the caller can see wrong at once: the runtime closed, the caller, the
        request itself (``AdmissionError``, the supervisor's words)."""
        self.requests.check()  # open; the caller: before the waiter is registered
        wrong = option_type_problem(request)  # the call is wrong, as for any argument's kind
        if wrong is not None:
            raise TypeError(wrong)
        # the supervisor's rules, and the request's own settings, at once
        problem = request_problem(request, self.limits) or policy_problem(request)
        if problem is not None:
            raise AdmissionError(problem)

    def prepare(self, request: SpawnRequest) -> tuple[str, Waiter, SpawnRequest]:
        """A root run's id, the waiter its outcome will land in, and its request."""
        self.check(request)
        run_id = new_id("r")
        waiter = self.roots.expect(run_id)
        return run_id, waiter, self._stamped(request, run_id)

    def _stamped(self, request: SpawnRequest, run_id: str) -> SpawnRequest:
        """The request with its ids, and the runtime's approval route."""
        route = request.approvals_in_store or self.approvals_in_store
        return msgspec.structs.replace(
            request, request_id=run_id, run_id=run_id, approvals_in_store=route
        )

    def admit(self, request: SpawnRequest) -> tuple[str, Waiter]:
        """``Runtime.continue_run``: the request asked, its admission waited for (the run it
        continues is read by the supervisor: what refuses it is known only there)."""
        run_id, waiter, request = self.prepare(request)
        try:
            reply: SpawnReply = self.requests.ask_claimed(
                request, self.ask_timeout, self.taken_grace
            )
        except AskRevoked as exc:  # withdrawn: nothing started
            self.roots.forget(run_id)
            raise TimeoutError(f"continue_run: {exc}; call it again") from None
        except AskOverdue as exc:  # taken, not decided yet: it may start
            self.roots.forget(run_id)
            raise TimeoutError(f"continue_run: {exc}: {_may_start([run_id])}") from None
        except BaseException:  # closed, the store failed: nothing will land
            self.roots.forget(run_id)
            raise
        if reply.error is not None:
            self.roots.forget(run_id)
            raise AdmissionError(reply.error)
        return run_id, waiter

    def spawn(self, request: SpawnRequest) -> tuple[str, Waiter]:
        """``Runtime.spawn`` (and ``run``): the request checked here (``AdmissionError`` for
        what the caller can see: the request, an agent not among the current definitions),
        then told; its admission is not waited for (a refusal reaches the waiter)."""
        self.check(request)
        agents = self.agents()
        if request.agent not in agents:
            raise AdmissionError(unknown_agent(request.agent, agents))
        run_id = new_id("r")
        window = self.roots.window
        window.enter(run_id)  # room for it (or TimeoutError naming the stall)
        waiter = self.roots.expect(run_id)
        supervisor = self.requests.hosting.supervisor
        stamped = self._stamped(request, run_id)
        checked = self.roots.checked
        # its admission does not check it again (``check`` above), unless it holds shared
        # values: the caller's own objects, which it may still change until then
        if checked is not None and checked.limits is self.limits and not stamped.shared:
            checked.requests[run_id] = stamped
        if supervisor is None or not supervisor.tell(stamped):
            if checked is not None:
                checked.forget(run_id)
            self.roots.forget(run_id)
            window.decided((run_id,))
            raise RuntimeClosed("the runtime is closed")
        return run_id, waiter

    def admit_many(
        self, requests: Sequence[SpawnRequest | AdmissionError]
    ) -> list[tuple[str, Waiter] | AdmissionError]:
        """``Runtime.spawn_many``: every request checked here (a bad one is refused alone,
        its place in the result naming why), the rest asked as ONE ``SpawnMany`` (one
        decision, one store commit); a run id and waiter per admitted request, in order.
        An error of the whole call (closed, timed out, the store failed) forgets every
        waiter and is raised, and nothing is half-started: a request the supervisor had not
        taken when the timeout ran out is withdrawn (``TimeoutError``: none started); one
        it took is waited for to its answer."""
        self.requests.check_open()
        self.requests.check_caller()
        out: list[tuple[str, Waiter] | AdmissionError] = []
        asked: list[SpawnRequest] = []
        places: list[int] = []
        checked = self.roots.checked  # filed as ``spawn`` files (not with shared values)
        filed = checked.requests if checked is not None and checked.limits is self.limits else None
        for i, request in enumerate(requests):
            if isinstance(request, AdmissionError):
                out.append(request)
                continue
            try:  # (no call: a check that raises, on a hostile value, refuses its job alone)
                problem = request_problem(request, self.limits) or policy_problem(request)
            except Exception as exc:  # (raised, it left the jobs before it filed and waited)
                problem = f"the request could not be checked: {type(exc).__name__}: {exc}"
            if problem is not None:
                out.append(AdmissionError(f"job {i} ({request.agent!r}): {problem}"))
                continue
            run_id = new_id("r")
            out.append((run_id, self.roots.expect(run_id)))
            stamped = self._stamped(request, run_id)
            if filed is not None and not stamped.shared:
                filed[run_id] = stamped
            asked.append(stamped)
            places.append(i)
        if not asked:
            return out
        try:
            # one decision for them all: give it time in proportion (``ask_timeout`` is for
            # one message's work); taken by the supervisor, or withdrawn: never both
            replies: tuple[SpawnReply, ...] = self.requests.ask_claimed(
                SpawnMany(requests=tuple(asked)),
                self.ask_timeout + 0.002 * len(asked),
                self.taken_grace,
            )
        except BaseException as exc:  # closed, withdrawn, the store failed: nothing will land
            for request in asked:
                self.roots.forget(request.request_id)
                if checked is not None:
                    checked.forget(request.request_id)
            if isinstance(exc, AskRevoked):
                raise TimeoutError(
                    f"spawn_many: {exc}: none of its {len(asked)} runs was started or"
                    " recorded; call it again"
                ) from None
            if isinstance(exc, AskOverdue):
                ids = [request.request_id for request in asked]
                raise TimeoutError(f"spawn_many: {exc}: {_may_start(ids)}") from None
            raise
        for i, request, reply in zip(places, asked, replies, strict=True):
            if reply.error is not None:
                self.roots.forget(request.request_id)
                out[i] = AdmissionError(f"job {i} ({request.agent!r}): {reply.error}")
        return out

    def tell(self, request: SpawnRequest, wait: float | None) -> tuple[str, Waiter, float]:
        """``Runtime.run``: the request told as ``spawn`` tells it (the admission is not
        waited for, the outcome is anyway). The run id, its waiter and how long to wait."""
        wait = check_timeout(wait, "wait")  # before the run starts: a bad wait starts none
        run_id, waiter = self.spawn(request)  # refuses a bad request at once
        budget = wait
        if budget is None:
            spec = self.agents().get(request.agent)
            budget = self.limits.timeout_for(request.timeout, spec.timeout if spec else None) + 30.0
        return run_id, waiter, budget

    def forget(self, run_id: str) -> None:
        """Nobody waits for ``run_id`` any more."""
        self.roots.forget(run_id)

    def attach(self, run_id: str) -> tuple[Waiter, str]:
        """``Runtime.attach``: the waiter of a root run, and its agent; ``LookupError`` for
        an unknown run or one that is not a root."""
        self.requests.check_open()
        self.roots.window.settle(run_id)  # spawned and not decided yet: not unknown
        record = self.store.get_run(run_id)
        if record is None:
            raise LookupError(f"no run with id {run_id!r}")
        if record.parent_run_id is not None:
            raise LookupError(
                f"run {run_id} is a child of {record.parent_run_id}; its outcome goes to its"
                f" parent: attach to its root {record.root_run_id} instead"
            )
        # The waiter is registered before the store is read: an outcome delivered after the
        # registration lands in it; one delivered before is already committed, so read here.
        waiter = self.roots.attach(run_id)
        current = self.store.get_run(run_id)
        if current is not None and current.status.terminal:
            self.roots.landed(current.outcome or Outcome(run_id=run_id, status=current.status))
        return waiter, record.agent


def _may_start(run_ids: Sequence[str]) -> str:
    """What a caller told its taken request is overdue can still do (``AskOverdue``)."""
    shown = ", ".join(run_ids[:10]) + (f" ... ({len(run_ids)} in all)" if len(run_ids) > 10 else "")
    return (
        f"its runs may still start, with nobody waiting: {shown}; once decided, rt.runs()"
        " lists them and rt.attach(run_id) or rt.stop(run_id) takes them"
    )
