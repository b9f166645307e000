"""A wake that could not go off before its run's deadline arms no timer (``AgentActor.wake_after``):
a ``receive`` (or a ``sleep``) of the run's whole timeout or more leaves the run to time out at
its deadline, as it did when its timer was armed; a shorter one still goes off."""

from __future__ import annotations

import pytest

from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.messages import Mail, RunStatus
from subagents.runtime import Runtime
from subagents.store.base import RunStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")

TIMEOUT_S = 0.2
"""The runs' timeout: short, so that a run that must time out does so soon."""


async def _waits(ctx: AgentContext) -> str:
    """Waits for mail as long as its task says (seconds); what it got, or that none came."""
    mail: Mail | None = await ctx.receive(timeout=float(ctx.task))
    return "mail" if mail is not None else "no mail"


async def _sleeps(ctx: AgentContext) -> str:
    await ctx.sleep(float(ctx.task))
    return "slept"


def _wake_timers(rt: Runtime) -> int:
    return rt.timer.scheduled_kinds["wakes"]


@pytest.mark.parametrize("seconds", [TIMEOUT_S, 3000.0])
def test_a_receive_at_or_past_the_deadline_arms_no_timer_and_the_run_times_out(
    store: RunStore, seconds: float
) -> None:
    with Runtime([FunctionAgent.create("waits", _waits)], store=store) as rt:
        outcome = rt.run("waits", str(seconds), timeout=TIMEOUT_S, wait=WAIT)
        assert outcome.status is RunStatus.TIMED_OUT, outcome
        assert outcome.error_kind == "timeout"
        assert _wake_timers(rt) == 0


def test_a_sleep_past_the_deadline_arms_no_timer_and_the_run_times_out(store: RunStore) -> None:
    with Runtime([FunctionAgent.create("sleeps", _sleeps)], store=store) as rt:
        outcome = rt.run("sleeps", "3000", timeout=TIMEOUT_S, wait=WAIT)
        assert outcome.status is RunStatus.TIMED_OUT, outcome
        assert _wake_timers(rt) == 0


def test_a_receive_shorter_than_the_deadline_still_goes_off(store: RunStore) -> None:
    with Runtime([FunctionAgent.create("waits", _waits)], store=store) as rt:
        outcome = rt.run("waits", "0.05", timeout=20.0, wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.result == "no mail"
        assert _wake_timers(rt) == 1


def test_mail_still_reaches_a_receive_that_arms_no_timer(store: RunStore) -> None:
    with Runtime([FunctionAgent.create("waits", _waits)], store=store) as rt:
        handle = rt.spawn("waits", "3000", timeout=60.0)  # its receive: past the deadline
        rt.send(handle.run_id, "hello")
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        assert outcome.result == "mail"
        assert _wake_timers(rt) == 0
