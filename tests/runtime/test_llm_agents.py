"""LLM agents on the offline model: fan-out, depth, background spawns, refusals, user tools.

Every test runs real actors on real threads; what the model was shown is read back from the
ScriptedModel's recent requests.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import msgspec
import pytest

from shown import ShownModel
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.behaviour.tools import SPAWN, Tool, ToolError
from subagents.messages import EventKind, RunStatus, ToolResultBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import AgentLike, Runtime
from subagents.supervision.limits import Limits

from .conftest import WAIT, Events, SlotTally, requests_of, spec, tool_results

pytestmark = pytest.mark.usefixtures("no_new_threads")


def spawn_call(agent: str, task: str, **extra: Any) -> dict[str, Any]:
    return {"name": SPAWN, "input": {"agent": agent, "task": task, **extra}}


def decode(result: ToolResultBlock) -> dict[str, Any]:
    value = msgspec.json.decode(result.content)
    assert isinstance(value, dict)
    return value


def test_parallel_fan_out_returns_every_result_in_one_user_message() -> None:
    barrier = threading.Barrier(3, timeout=WAIT)

    def worker(ctx: AgentContext) -> str:
        barrier.wait()  # passes only when the three children run at the same time
        return f"did {ctx.task}"

    model = ShownModel(
        {
            "lead": [
                {
                    "text": "splitting",
                    "tool_calls": [spawn_call("worker", f"part {i}") for i in range(3)],
                },
                {"text": "combined: {results}"},
            ]
        }
    )
    with Runtime([spec("lead"), FunctionAgent.create("worker", worker)], model=model) as rt:
        outcome = rt.run("lead", "the job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED, outcome
        lead_requests = requests_of(model, "lead")
        assert len(lead_requests) == 2
        last = lead_requests[1].messages[-1]
        assert last.role == "user"
        results = tool_results(last)
        assert [r.tool_use_id for r in results] == [f"toolu_lead_0_{i}" for i in range(3)]
        assert [decode(r)["result"] for r in results] == [f"did part {i}" for i in range(3)]
        assert all(decode(r)["status"] == "completed" and not r.is_error for r in results)
        assert outcome.result is not None and "did part 2" in outcome.result
        # exactly one user message after the assistant's three calls
        roles = [m.role for m in lead_requests[1].messages]
        assert roles == ["user", "assistant", "user"]


def test_grandchild_at_depth_two_and_the_tree_view() -> None:
    model = ScriptedModel(
        {
            "lead": [{"tool_calls": [spawn_call("mid", "half of {task}")]}, "lead: {result0}"],
            "mid": [{"tool_calls": [spawn_call("leaf", "quarter")]}, "mid got {result0}"],
            "leaf": [{"text": "leaf done", "usage": {"input_tokens": 100, "output_tokens": 7}}],
        }
    )
    with Runtime([spec("lead"), spec("mid"), spec("leaf")], model=model) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        tree = rt.tree(outcome.run_id)
        assert (tree.agent, tree.depth, tree.status, tree.steps) == (
            "lead",
            0,
            RunStatus.COMPLETED,
            2,
        )
        (mid,) = tree.children
        (leaf,) = mid.children
        assert (mid.agent, mid.depth, mid.steps) == ("mid", 1, 2)
        assert (leaf.agent, leaf.depth, leaf.steps, leaf.status) == (
            "leaf",
            2,
            1,
            RunStatus.COMPLETED,
        )
        assert leaf.usage.input_tokens == 100 and leaf.usage.output_tokens == 7
        assert leaf.subtree_usage == leaf.usage
        assert mid.subtree_usage == mid.usage + leaf.usage
        assert tree.subtree_usage == tree.usage + mid.usage + leaf.usage
        assert tree.subtree_usage.model_calls == 5
        assert rt.totals(outcome.run_id).usage == tree.subtree_usage
        assert leaf.result == "leaf done"
        leaf_record = rt.get(leaf.run_id)
        assert leaf_record is not None
        assert leaf_record.root_run_id == outcome.run_id
        assert leaf_record.parent_run_id == mid.run_id


def test_spawn_is_not_offered_at_the_depth_limit_and_refused_if_called() -> None:
    model = ShownModel(
        {
            "lead": [{"tool_calls": [spawn_call("mid", "go")]}, "lead: {result0}"],
            "mid": [{"tool_calls": [spawn_call("lead", "deeper")]}, "mid saw: {result0}"],
        }
    )
    with Runtime([spec("lead"), spec("mid")], model=model, limits=Limits(max_depth=1)) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        (lead_first, _) = requests_of(model, "lead")
        assert SPAWN in {t.name for t in lead_first.tools}
        mid_first, mid_second = requests_of(model, "mid")
        assert SPAWN not in {t.name for t in mid_first.tools}
        (refusal,) = tool_results(mid_second.messages[-1])
        assert refusal.is_error
        # the model hears why, in admission's words (not just that the tool is missing)
        assert refusal.content.startswith(
            "tool 'spawn_subagent' is not available to mid: depth limit:"
        ), refusal.content
        assert len(rt.runs(root_run_id=outcome.run_id)) == 2  # nothing spawned at depth 2


def test_spawn_schema_lists_dispatchable_agents_except_the_caller() -> None:
    model = ShownModel({})
    with Runtime([spec("lead"), spec("a"), spec("b")], model=model) as rt:
        rt.run("lead", "x", wait=WAIT)
        (request,) = requests_of(model, "lead")
        (schema,) = [t for t in request.tools if t.name == SPAWN]
        assert schema.input_schema["properties"]["agent"]["enum"] == ["a", "b"]
        assert "- a: The a agent." in schema.description


def test_background_spawn_returns_the_run_id_at_once_and_the_outcome_arrives_as_mail() -> None:
    release = threading.Event()

    def slow(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return "background work done"

    model = ShownModel(
        {
            "lead": [
                {"tool_calls": [spawn_call("slow", "bg", background=True)]},
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": WAIT}}]},
                {"text": "got mail from {mail_agent} ({mail_from}): {mail_content}"},
            ]
        }
    )
    events = Events()
    with Runtime([spec("lead"), FunctionAgent.create("slow", slow)], model=model) as rt:
        rt.subscribe(events)
        handle = rt.spawn("lead", "job")
        # the lead takes its second step (and waits for mail) while the child still runs
        events.wait_for(
            lambda items: any(
                e.kind is EventKind.TOOL_CALL and e.data.get("tool") == "wait_for_message"
                for e in items
            )
        )
        (child,) = [r for r in rt.runs() if r.agent == "slow"]
        assert child.status is RunStatus.RUNNING
        assert child.background
        (first_result,) = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert decode(first_result) == {"run_id": child.run_id, "queued": False}
        release.set()
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result is not None
        prefix = f"got mail from slow ({child.run_id}): [background result]"
        assert outcome.result.startswith(prefix)
        assert '"result":"background work done"' in outcome.result


def test_max_children_queues_the_extra_spawn_and_every_result_comes_back() -> None:
    release = threading.Event()

    def hold(ctx: AgentContext) -> str:
        assert release.wait(WAIT)
        return f"held {ctx.task}"

    model = ShownModel(
        {
            "lead": [
                {"tool_calls": [spawn_call("hold", f"h{i}") for i in range(3)]},
                "done: {results}",
            ]
        }
    )
    events = Events()
    tally = SlotTally()
    agents: list[AgentLike] = [spec("lead", max_children=2), FunctionAgent.create("hold", hold)]
    with Runtime(agents, model=model) as rt:
        rt.subscribe(events)
        rt.subscribe(tally)
        handle = rt.spawn("lead", "job")
        events.wait_count(EventKind.QUEUED, "hold", 1)  # the third waits for a place
        assert len(events.of(EventKind.STARTED, "hold")) == 2
        release.set()
        outcome = handle.result(WAIT)
        assert outcome.status is RunStatus.COMPLETED
        results = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert [r.is_error for r in results] == [False, False, False]
        assert ['"result":"held h2"' in r.content for r in results] == [False, False, True]
        assert len(events.of(EventKind.STARTED, "hold")) == 3
        assert tally.max_of("parent:") == 2  # never more than maxChildren at once


def test_unknown_agent_is_an_error_result_not_an_exception() -> None:
    model = ShownModel({"lead": [{"tool_calls": [spawn_call("ghost", "boo")]}, "after: {last}"]})
    with Runtime([spec("lead"), spec("worker")], model=model) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        (result,) = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert result.is_error
        assert result.content == "unknown agent 'ghost'; known agents: lead, worker"


def test_a_tool_not_offered_is_refused_at_execution() -> None:
    model = ShownModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "send_message", "input": {"to": "x", "content": "y"}},
                        {"name": "check_mailbox", "input": {}},
                        {"name": "no_such_tool", "input": {}},
                    ]
                },
                "ok",
            ]
        }
    )
    with Runtime([spec("lead", tools=("check_mailbox",))], model=model) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        first, second = requests_of(model, "lead")
        assert [t.name for t in first.tools] == ["check_mailbox"]
        results = tool_results(second.messages[-1])
        assert [(r.is_error, r.content) for r in results] == [
            (True, "tool 'send_message' is not available to lead"),
            (False, "no new mail"),
            (True, "tool 'no_such_tool' is not available to lead"),
        ]


# ---- user tools --------------------------------------------------------------------------------


def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


def refuse(reason: str) -> str:
    """Always refuses."""
    raise ToolError(f"refused: {reason}")


def explode() -> str:
    """Always crashes."""
    raise ValueError("kaboom")


def test_a_user_tool_schema_comes_from_its_signature() -> None:
    tool = Tool.from_function(add)
    schema = tool.schema
    assert schema.name == "add"
    assert schema.description == "Add two integers."
    assert schema.input_schema["properties"] == {
        "a": {"type": "integer"},
        "b": {"type": "integer", "default": 2},
    }
    assert schema.input_schema["required"] == ["a"]
    assert tool.call({"a": 1}) == "3"
    with pytest.raises(ToolError, match="invalid input for add"):
        tool.call({"a": "one"})
    with pytest.raises(ToolError, match="invalid input for add"):
        tool.call({"a": 1, "c": 3})


def test_user_tools_answer_and_tool_errors_are_error_results() -> None:
    model = ShownModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "add", "input": {"a": 40}},
                        {"name": "refuse", "input": {"reason": "no"}},
                        {"name": "add", "input": {"a": "x"}},
                    ]
                },
                "sum={result0}",
            ]
        }
    )
    with Runtime([spec("lead")], model=model, tools=[add, refuse]) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "sum=42"
        first, second = requests_of(model, "lead")
        assert {"add", "refuse"} <= {t.name for t in first.tools}
        results = tool_results(second.messages[-1])
        assert [r.is_error for r in results] == [False, True, True]
        assert results[1].content == "refused: no"
        assert results[2].content.startswith("invalid input for add:")


def test_a_crashing_tool_fails_the_run_and_the_requester_hears_it() -> None:
    model = ShownModel(
        {
            "lead": [{"tool_calls": [spawn_call("worker", "w")]}, "lead saw: {result0}"],
            "worker": [{"tool_calls": [{"name": "explode", "input": {}}]}, "never"],
        }
    )
    events = Events()
    with Runtime([spec("lead"), spec("worker")], model=model, tools=[explode]) as rt:
        rt.subscribe(events)
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        (result,) = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert result.is_error
        body = decode(result)
        assert body["status"] == "failed"
        assert body["error"] == "tool explode raised ValueError: kaboom"
        (worker,) = rt.runs(agent="worker")
        assert worker.status is RunStatus.FAILED
        assert worker.outcome is not None and worker.outcome.error_kind == "tool_crashed"
        assert len(events.of(EventKind.FAILED, "worker")) == 1
        # as a root run: the caller gets the failure, no hang
        direct = rt.run("worker", "again", wait=WAIT)
        assert direct.status is RunStatus.FAILED
        assert direct.error_kind == "tool_crashed"


def test_two_waits_for_mail_in_one_turn_do_not_hang_the_run() -> None:
    model = ShownModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "wait_for_message", "input": {"timeout": 0.05}},
                        {"name": "wait_for_message", "input": {"timeout": 0.05}},
                    ]
                },
                "after waiting",
            ]
        }
    )
    with Runtime([spec("lead")], model=model) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.status is RunStatus.COMPLETED
        assert outcome.result == "after waiting"
        results = tool_results(requests_of(model, "lead")[1].messages[-1])
        assert [(r.is_error, r.content) for r in results] == [
            (False, "no mail arrived before the timeout"),
            (True, "already waiting for mail in this turn; wait once per turn"),
        ]


def test_wait_for_message_with_a_zero_timeout_returns_at_once() -> None:
    model = ScriptedModel(
        {
            "lead": [
                {
                    "tool_calls": [
                        {"name": "wait_for_message", "input": {"timeout": 0}},
                        {"name": "wait_for_message", "input": {"timeout": -1}},
                    ]
                },
                "{results}",
            ]
        }
    )
    with Runtime([spec("lead")], model=model) as rt:
        outcome = rt.run("lead", "job", wait=20)  # below the default wait (30 s): it is not used
        assert outcome.result == (
            "no mail arrived before the timeout\nargument 'timeout' must be >= 0 seconds, got -1"
        )


def test_a_wait_for_message_with_a_nan_timeout_is_refused_and_timers_go_on() -> None:
    """A NaN timeout (a YAML script's ``.nan``) passed the ``>= 0`` check and became the
    run's wake deadline: armed in the timer service, it ended the timer's thread, so this
    run's wait never timed out, nor any later one (nor any run deadline): both hung."""
    model = ScriptedModel(
        {
            "lead": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": math.nan}}]},
                "{results}",
            ],
            "other": [
                {"tool_calls": [{"name": "wait_for_message", "input": {"timeout": 0.05}}]},
                "{results}",
            ],
        }
    )
    with Runtime([spec("lead"), spec("other")], model=model) as rt:
        outcome = rt.run("lead", "job", wait=WAIT)
        assert outcome.result == "argument 'timeout' must be >= 0 seconds, got nan"
        later = rt.run("other", "job", wait=WAIT)
        assert later.result == "no mail arrived before the timeout"


def test_task_and_context_make_the_first_message_and_the_model_is_resolved() -> None:
    model = ShownModel({})
    agents: list[AgentLike] = [spec("lead", model="haiku"), spec("other")]
    with Runtime(agents, model=model, default_model="fable") as rt:
        rt.run("lead", "the task", context="some background", wait=WAIT)
        rt.run("other", "plain", wait=WAIT)
        rt.run("other", "forced", model="opus", wait=WAIT)
    lead_request, plain, forced = model.requests
    first = lead_request.messages[0].text
    assert "some background" in first and first.endswith("the task")
    assert first.index("some background") < first.index("the task")
    # the prompt, then (it has the file tools) where it works, as Claude Code tells a model
    assert lead_request.system.startswith("You are lead.\n\n<env>\nWorking directory: ")
    assert (lead_request.model, plain.model, forced.model) == ("haiku", "fable", "opus")
    assert plain.messages[0].text == "plain"


def test_max_turns_ends_the_run_as_failed() -> None:
    loop = {"tool_calls": [{"name": "check_mailbox", "input": {}}]}
    model = ShownModel({"looper": [loop] * 10})
    with Runtime([spec("looper", max_turns=3)], model=model) as rt:
        outcome = rt.run("looper", "x", wait=WAIT)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error_kind == "max_turns"
        assert outcome.error == "looper reached its limit of 3 turns"
        assert outcome.steps == 3
        assert len(requests_of(model, "looper")) == 3


def test_a_model_failure_fails_the_run_with_its_kind() -> None:
    model = ScriptedModel({"lead": [{"error": {"kind": "auth", "message": "bad key"}}]})
    with Runtime([spec("lead")], model=model) as rt:
        outcome = rt.run("lead", "x", wait=WAIT)
        assert outcome.status is RunStatus.FAILED
        assert outcome.error_kind == "model_auth"
        assert outcome.error == "bad key"


def test_claude_code_task_alias_offers_spawn_and_disallowed_tools_remove_it() -> None:
    model = ShownModel({})
    agents: list[AgentLike] = [
        spec("cc", tools=("Task", "check_mailbox")),
        spec("denied", disallowed_tools=(SPAWN, "send_message")),
    ]
    with Runtime(agents, model=model) as rt:
        rt.run("cc", "x", wait=WAIT)
        rt.run("denied", "x", wait=WAIT)
    cc, denied = model.requests
    cc_offered = {t.name for t in cc.tools}
    assert {SPAWN, "check_mailbox"} <= cc_offered
    assert "send_message" not in cc_offered and "wait_for_message" not in cc_offered
    offered = {t.name for t in denied.tools}
    assert SPAWN not in offered and "send_message" not in offered
    assert "check_mailbox" in offered


def test_runs_of_one_definition_under_different_ceilings_are_offered_each_its_own_tools() -> None:
    """The tools offered that depend only on a definition and its ceiling are made once for
    all its runs (``offer.py``): a run under a requester that disallows a tool is still not
    offered it after a run of the same definition without that requester was."""
    model = ShownModel(
        {
            "lead": [
                {"tool_calls": [{"name": SPAWN, "input": {"agent": "worker", "task": "t"}}]},
                "lead done",
            ]
        }
    )
    agents: list[AgentLike] = [
        spec("lead", disallowed_tools=("Grep",)),
        spec("worker", tools=("Read", "Grep")),
    ]
    with Runtime(agents, model=model) as rt:
        alone = rt.run("worker", "x", wait=WAIT)  # no requester: offered Read and Grep
        led = rt.run("lead", "x", wait=WAIT)
        again = rt.run("worker", "y", wait=WAIT)
    assert alone.ok and led.ok and again.ok, (alone, led, again)
    offered = [{t.name for t in r.tools} for r in model.requests if r.agent == "worker"]
    assert offered == [{"Read", "Grep"}, {"Read"}, {"Read", "Grep"}]


def test_a_definition_replaced_under_its_name_is_offered_its_new_tools_at_once() -> None:
    """The offers made once per definition (``offer.py``) are the definition object's: a
    definition registered again under the same name (a hot reload's change) with other
    ``tools`` is offered those from its next run, never the old ones kept for its name."""
    model = ShownModel({})
    with Runtime([spec("worker", tools=("Read", "Grep"))], model=model) as rt:
        before = rt.run("worker", "x", wait=WAIT)
        rt.registry.register(spec("worker", tools=("Read",), disallowed_tools=("Grep",)))
        after = rt.run("worker", "y", wait=WAIT)
        rt.registry.register(spec("worker", tools=("Read", "Grep")))  # and back, equal again
        back = rt.run("worker", "z", wait=WAIT)
    assert before.ok and after.ok and back.ok, (before, after, back)
    offered = [{t.name for t in r.tools} for r in model.requests if r.agent == "worker"]
    assert offered == [{"Read", "Grep"}, {"Read"}, {"Read", "Grep"}]
