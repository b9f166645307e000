"""Restarts in the OTP sense: intensity in a sliding window, backoff, resume from checkpoint."""

from __future__ import annotations

import random
from typing import Any

import pytest

from subagents.messages import EventKind, RestartDue, RunStatus, TextBlock, ToolResultBlock
from subagents.supervision.policy_settings import Policy, PolicyError, policy_of
from subagents.supervision.restarts import RestartIntensity, abnormal

from .conftest import spec


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


TRANSIENT = Policy(restart="transient", max_restarts=3, restart_period_s=10.0, backoff_s=0.1)


def test_intensity_is_counted_in_a_sliding_window() -> None:
    clock = Clock()
    intensity = RestartIntensity(clock=clock, rng=random.Random(1))
    for i in range(3):
        clock.now += 1.0
        assert intensity.decide("r", TRANSIENT, "crash").restart, i
    clock.now += 1.0
    refused = intensity.decide("r", TRANSIENT, "crash")
    assert not refused.restart
    assert refused.reason == "restart intensity reached: 3 restarts within 10 s (max 3)"
    # the first restart (at 1001) leaves the window at 1011: one more is allowed then, not before
    clock.now = 1010.9
    assert not intensity.decide("r", TRANSIENT, "crash").restart
    clock.now = 1011.0
    again = intensity.decide("r", TRANSIENT, "crash")
    assert again.restart and again.attempt == 4
    assert intensity.in_window("r", TRANSIENT) == 3
    assert intensity.decide("other", TRANSIENT, "crash").attempt == 1  # counted per run


def test_backoff_doubles_with_equal_jitter_and_a_cap() -> None:
    intensity = RestartIntensity(clock=Clock(), rng=random.Random(7))
    policy = Policy(restart="transient", backoff_s=0.1, backoff_max_s=0.5)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)]:
        delays = [intensity.backoff(policy, attempt) for _ in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays), attempt
        assert len(set(delays)) > 1  # jitter


def test_only_abnormal_exits_of_transient_runs_restart() -> None:
    intensity = RestartIntensity(clock=Clock())
    for kind in ("crash", "tool_crashed", "model_overloaded", "model_server", "child_failed"):
        assert abnormal(kind)
        assert intensity.decide(kind, TRANSIENT, kind).restart
    for kind in (None, "cancelled", "timeout", "budget", "max_turns", "model_refusal"):
        assert not abnormal(kind)
        assert not intensity.decide("x", TRANSIENT, kind).restart
    temporary = intensity.decide("t", Policy(), "crash")
    assert not temporary.restart and temporary.reason == "restart policy is temporary"


def test_policy_settings_from_a_definition_and_their_errors() -> None:
    good = spec(
        "a",
        restart="transient",
        metadata={"maxRestarts": 5, "restart_period": 2.5, "onFailure": "retry", "maxRetries": 1},
    )
    policy = policy_of(good)
    assert (policy.restart, policy.max_restarts, policy.restart_period_s) == ("transient", 5, 2.5)
    assert (policy.on_failure, policy.max_retries) == ("retry", 1)
    with pytest.raises(PolicyError, match=r"agent 'b' \(registered in code\): maxRestarts must"):
        policy_of(spec("b", metadata={"maxRestarts": -1}))
    with pytest.raises(PolicyError, match="onFailure must be one of report, retry, fail_parent"):
        policy_of(spec("c", metadata={"onFailure": "ignore"}))
    with pytest.raises(PolicyError, match="sharedContext must be a list of key names"):
        policy_of(spec("d", metadata={"sharedContext": {"a": 1}}))


def test_a_policy_is_read_once_per_definition_object() -> None:
    first = spec("a", restart="transient", metadata={"maxRestarts": 2})
    assert policy_of(first) is policy_of(first)  # remembered
    reloaded = spec("a", restart="transient", metadata={"maxRestarts": 7})
    assert policy_of(reloaded).max_restarts == 7  # a new definition is read anew
    assert policy_of(first).max_restarts == 2


# ---- real actors ------------------------------------------------------------------------------


def test_a_transient_run_resumes_from_its_checkpoint_after_a_crash(make_runtime: Any) -> None:
    runs_of_tool: list[str] = []

    def fetch(what: str) -> str:
        """Fetch something (counted: it must not run twice)."""
        runs_of_tool.append(what)
        return f"fetched {what}"

    rt, model, events = make_runtime(
        [
            spec(
                "lead",
                restart="transient",
                metadata={"restartBackoff": 0.01, "maxRestarts": 3},
            ),
            spec("worker"),
        ],
        {
            "lead": [
                {
                    "text": "fetching",
                    "tool_calls": [
                        {"name": "fetch", "input": {"what": "data"}},
                        {"name": "spawn_subagent", "input": {"agent": "worker", "task": "help"}},
                    ],
                },
                {
                    "text": "summary of {results}",
                    "error": {"kind": "server", "message": "boom"},
                    "fail_times": 1,
                },
            ],
            "worker": ["worker helped"],
        },
        tools=[fetch],
    )
    outcome = rt.run("lead", "go", wait=60)
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result is not None
    assert outcome.result.startswith("summary of fetched data\n")
    assert '"result":"worker helped"' in outcome.result
    assert runs_of_tool == ["data"]  # not run again by the restart
    assert [r.agent for r in rt.runs(root_run_id=outcome.run_id)].count("worker") == 1
    restarted = events.of(EventKind.RESTARTED, outcome.run_id)
    assert [(e.data["attempt"], e.data["mode"], e.data["error_kind"]) for e in restarted] == [
        (1, "restart", "model_server")
    ]
    assert rt.get(outcome.run_id).restarts == 1
    # the model saw the earlier conversation: task, its own turn, both tool results
    lead_calls = [r for r in model.requests if r.agent == "lead"]
    assert len(lead_calls) == 3
    resumed = lead_calls[-1].messages
    assert [m.role for m in resumed] == ["user", "assistant", "user"]
    assert isinstance(resumed[0].content[0], TextBlock) and resumed[0].content[0].text == "go"
    results = [b for b in resumed[2].content if isinstance(b, ToolResultBlock)]
    assert results[0].content == "fetched data"
    assert '"result":"worker helped"' in results[1].content
    assert rt.totals(outcome.run_id).restarts == 1


def test_restart_intensity_reached_fails_the_run_for_good(make_runtime: Any) -> None:
    rt, _model, events = make_runtime(
        [
            spec(
                "flaky",
                restart="transient",
                metadata={"maxRestarts": 2, "restartPeriod": 60, "restartBackoff": 0.005},
            )
        ],
        {"flaky": [{"error": {"kind": "overloaded", "message": "try later"}}]},
    )
    outcome = rt.run("flaky", "go", wait=60)
    assert outcome.status is RunStatus.FAILED
    assert outcome.error_kind == "model_overloaded"
    assert outcome.error == (
        "try later (not restarted: restart intensity reached: 2 restarts within 60 s (max 2))"
    )
    attempts = [e.data["attempt"] for e in events.of(EventKind.RESTARTED, outcome.run_id)]
    assert attempts == [1, 2]
    assert rt.get(outcome.run_id).restarts == 2
    delays = [e.data["delay_s"] for e in events.of(EventKind.RESTARTED, outcome.run_id)]
    assert 0.0025 <= delays[0] <= 0.005 and 0.005 <= delays[1] <= 0.01


def test_temporary_runs_and_normal_exits_are_not_restarted(make_runtime: Any) -> None:
    rt, _model, events = make_runtime(
        [
            spec("temp"),
            spec("capped", restart="transient", max_turns=1),
            spec("slow", restart="transient", timeout=0.2),
        ],
        {
            "temp": [{"error": {"kind": "server", "message": "boom"}}],
            "capped": [{"tool_calls": [{"name": "check_mailbox", "input": {}}]}],
            "slow": [{"text": "never", "delay": 5}],
        },
    )
    temp = rt.run("temp", "go", wait=60)
    capped = rt.run("capped", "go", wait=60)
    slow = rt.run("slow", "go", wait=60)
    assert (temp.status, temp.error) == (RunStatus.FAILED, "boom")
    assert (capped.status, capped.error_kind) == (RunStatus.FAILED, "max_turns")
    assert slow.status is RunStatus.TIMED_OUT
    assert events.of(EventKind.RESTARTED) == []


def test_a_crash_in_a_tool_restarts_without_rerunning_finished_calls(make_runtime: Any) -> None:
    calls: list[str] = []

    def step(name: str) -> str:
        """A step that crashes the first time it is asked for 'b'."""
        calls.append(name)
        if name == "b" and calls.count("b") == 1:
            raise RuntimeError("disk full")
        return f"{name} ok"

    rt, _model, events = make_runtime(
        [spec("lead", restart="transient", metadata={"restartBackoff": 0.001})],
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "step", "input": {"name": "a"}},
                        {"name": "step", "input": {"name": "b"}},
                    ]
                },
                "{results}",
            ]
        },
        tools=[step],
    )
    outcome = rt.run("lead", "go", wait=60)
    assert outcome.status is RunStatus.COMPLETED
    assert outcome.result == "a ok\nb ok"
    assert calls == ["a", "b", "b"]  # 'a' had its result: only 'b' ran again
    [restart] = events.of(EventKind.RESTARTED, outcome.run_id)
    assert restart.data["error_kind"] == "tool_crashed"


def test_a_run_stopped_during_its_backoff_is_not_started_again(make_runtime: Any) -> None:
    rt, model, events = make_runtime(
        [spec("flaky", restart="transient", metadata={"restartBackoff": 30})],
        {"flaky": [{"error": {"kind": "server", "message": "boom"}}]},
    )
    handle = rt.spawn("flaky", "go")
    events.wait_for(lambda e: e.kind is EventKind.RESTARTED and e.run_id == handle.run_id)
    assert handle.status is RunStatus.RUNNING  # waiting out its backoff, slot kept
    assert rt.stop(handle.run_id) == (handle.run_id,)
    outcome = handle.result(60)
    assert outcome.status is RunStatus.CANCELLED
    assert len(model.requests) == 1
    # a late timer: the supervisor is told the backoff is over; the ask after it is answered
    # only once that was handled (one inbox, in order), and nothing started again
    supervisor: Any = rt._supervisor
    assert supervisor.tell(RestartDue(run_id=handle.run_id))
    assert rt.stats().hosted == 0
    assert len(events.of(EventKind.STARTED, handle.run_id)) == 1
