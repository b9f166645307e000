"""The offline scripted model: every turn field, templating, signals, failures, threads."""

from __future__ import annotations

import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import structlog

from recorded_waits import RecordedWaits
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChatMessage,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from subagents.models import Model, ModelError, ScriptedModel, ScriptError, Turn


def user(*blocks: TextBlock | ToolResultBlock | str) -> ChatMessage:
    content = tuple(TextBlock(text=b) if isinstance(b, str) else b for b in blocks)
    return ChatMessage(role="user", content=content)


def assistant(text: str = "ok") -> ChatMessage:
    return ChatMessage(role="assistant", content=(TextBlock(text=text),))


def request(
    agent: str, *messages: ChatMessage, run_id: str = "r1", system: str = ""
) -> ModelRequest:
    return ModelRequest(
        model="scripted", system=system, messages=messages, agent=agent, run_id=run_id
    )


def test_is_a_model() -> None:
    assert isinstance(ScriptedModel(), Model)


def test_turn_index_is_number_of_assistant_messages() -> None:
    model = ScriptedModel({"a": ["first", "second", "third"]})
    assert model.complete(request("a", user("t"))).text == "first"
    convo: tuple[ChatMessage, ...] = (user("t"), assistant(), user("more"))
    assert model.complete(request("a", *convo)).text == "second"
    convo = (*convo, assistant(), user("again"))
    assert model.complete(request("a", *convo)).text == "third"


def test_exhausted_script_and_unknown_agent_use_default_reply() -> None:
    model = ScriptedModel({"a": ["only"]})
    resp = model.complete(request("a", user("t"), assistant(), user("x")))
    assert resp.text == "a finished: t"
    assert resp.stop_reason == "end_turn"
    assert model.complete(request("nobody", user("do it"))).text == "nobody finished: do it"
    custom = ScriptedModel(default_reply="[{agent}] done with {task} (turn {turn})")
    assert custom.complete(request("b", user("job"))).text == "[b] done with job (turn 0)"


def test_tool_calls_ids_stop_reason_and_templated_input() -> None:
    model = ScriptedModel(
        {
            "lead team/1": [
                {
                    "text": "dispatching",
                    "tool_calls": [
                        {"name": "spawn_subagent", "input": {"agent": "w", "task": "A: {task}"}},
                        {
                            "name": "spawn_subagent",
                            "input": {"nested": {"list": ["{agent}", 3, "{run_id}"]}, "n": 1},
                        },
                    ],
                }
            ]
        }
    )
    resp = model.complete(request("lead team/1", user("build"), run_id="run9"))
    assert resp.stop_reason == "tool_use"
    assert resp.text == "dispatching"
    uses = resp.tool_uses
    assert [u.id for u in uses] == ["toolu_lead_team_1_0_0", "toolu_lead_team_1_0_1"]
    assert uses[0].input == {"agent": "w", "task": "A: build"}
    assert uses[1].input == {"nested": {"list": ["lead team/1", 3, "run9"]}, "n": 1}
    # Deterministic: same request, same answer.
    assert model.complete(request("lead team/1", user("build"), run_id="run9")) == resp


def test_fresh_ids_give_each_take_of_a_turn_ids_of_its_own() -> None:
    """A turn taken again (a lost turn, after a crash; the model is a new one in a new
    process) answers with new tool-use ids, as a real model does: with the script's fixed
    ids, the second take's calls matched the first's journal by id, hiding a duplicate."""
    script = {"a": [{"tool_calls": [{"name": "check_mailbox"}, {"name": "ls"}]}]}
    model = ScriptedModel(script, fresh_ids=True)
    takes = [model.complete(request("a", user("t"))) for _ in range(2)]
    again = ScriptedModel(script, fresh_ids=True).complete(request("a", user("t")))
    ids = [[u.id for u in r.tool_uses] for r in (*takes, again)]
    assert len({i for both in ids for i in both}) == 6  # no id given twice
    for first, second in ids:  # one take's calls: its turn, their index, the take's mark
        assert re.fullmatch(r"toolu_a_0_0_[0-9a-f]{8}", first), first
        assert second == first[: -len("0_xxxxxxxx")] + "1" + first[-len("_xxxxxxxx") :]
    assert [u.name for u in takes[1].tool_uses] == ["check_mailbox", "ls"]  # else the same
    assert ScriptedModel.from_specs([], fresh_ids=True).fresh_ids
    fixed = ScriptedModel(script)  # the default: the script's ids, every take
    assert [u.id for u in fixed.complete(request("a", user("t"))).tool_uses] == [
        "toolu_a_0_0",
        "toolu_a_0_1",
    ]


def test_tool_calls_without_text() -> None:
    model = ScriptedModel({"a": [{"tool_calls": [{"name": "check_mailbox"}]}]})
    resp = model.complete(request("a", user("t")))
    assert resp.content == (ToolUseBlock(id="toolu_a_0_0", name="check_mailbox", input={}),)


def test_results_templating_from_last_user_message() -> None:
    model = ScriptedModel({"a": ["x", "got: {results} | first={result0} second={result1}"]})
    convo = (
        user("task"),
        assistant(),
        user(
            ToolResultBlock(tool_use_id="t0", content="alpha"),
            ToolResultBlock(tool_use_id="t1", content="beta", is_error=True),
            "and some text",
        ),
    )
    resp = model.complete(request("a", *convo))
    assert resp.text == "got: alpha\nbeta | first=alpha second=beta"


def test_json_tool_results_expose_their_fields() -> None:
    model = ScriptedModel(
        {
            "lead": [
                "x",
                "A={result0_result} ({result0_status}, {result0_run_id}) "
                "B={result1_result} [{result1_nope}] [{result2_x}] [{result0_usage}]",
                "all:\n{results_status}",
            ]
        }
    )
    spawn_a = '{"result": "alpha", "run_id": "r-a", "status": "completed", "usage": {"x": 1}}'
    spawn_b = '{"result": null, "run_id": "r-b", "status": "timed_out", "n": 3}'
    results = user(
        ToolResultBlock(tool_use_id="a", content=spawn_a),
        ToolResultBlock(tool_use_id="b", content=spawn_b),
        ToolResultBlock(tool_use_id="c", content="refused: unknown agent", is_error=True),
    )
    resp = model.complete(request("lead", user("t"), assistant(), results))
    assert resp.text == (
        "A=alpha (completed, r-a) B= [{result1_nope}] [{result2_x}] [{result0_usage}]"
    )
    convo = (user("t"), assistant(), user("u"), assistant(), results)
    resp = model.complete(request("lead", *convo))
    assert resp.text == "all:\ncompleted\ntimed_out\nrefused: unknown agent"


def test_task_last_turn_and_unknown_placeholders() -> None:
    model = ScriptedModel(
        {"a": ["x", "{task}/{last}/{turn}/{nope}/{{literal}}/{ {0}/{task.upper}/}"]}
    )
    resp = model.complete(request("a", user("T1", "T2"), assistant(), user("L")))
    assert resp.text == "T1\nT2/L/1/{nope}/{literal}/{ {0}/{task.upper}/}"


def test_mail_templating_uses_last_mail_tag_in_last_user_message() -> None:
    model = ScriptedModel(
        {
            "b": [
                "x",
                "from {mail_agent} ({mail_from}) id={mail_id} re={mail_reply_to}: {mail_content}",
            ]
        }
    )
    old = '<mail id="m0" from="r0" agent="old">stale</mail>'
    first = '<mail id="m1" from="run-a" agent="alice">hello</mail>'
    second = (
        '<mail id="m2" from="run-&quot;b&quot;" agent="bob &amp; co" reply_to="m1">'
        "line1\nline2</mail>"
    )
    convo = (
        user("task " + old),
        assistant(),
        user(first, ToolResultBlock(tool_use_id="t", content="mailbox: " + second)),
    )
    resp = model.complete(request("b", *convo))
    assert resp.text == 'from bob & co (run-"b") id=m2 re=m1: line1\nline2'


def test_mail_placeholders_empty_without_mail() -> None:
    model = ScriptedModel({"b": ["[{mail_from}][{mail_content}]"]})
    assert model.complete(request("b", user("no mail"))).text == "[][]"


def test_default_usage_from_characters_and_scripted_usage() -> None:
    model = ScriptedModel(
        {
            "a": [
                "abcdefgh",
                {"text": "x", "usage": {"input_tokens": 100, "cost_usd": 0.5}},
            ]
        }
    )
    resp = model.complete(request("a", user("12345678"), system="sys4"))
    # (4 + 8) // 4 = 3 in; 8 // 4 = 2 out.
    assert resp.usage == Usage(input_tokens=3, output_tokens=2, model_calls=1)
    tiny = model.complete(request("zzz", user("")))
    assert tiny.usage.input_tokens == 1
    resp2 = model.complete(request("a", user("12345678"), assistant("abcd")))
    assert resp2.usage.input_tokens == 100
    assert resp2.usage.output_tokens == 1
    assert resp2.usage.cost_usd == 0.5
    assert resp2.usage.model_calls == 1


def test_default_usage_counts_every_kind_of_block_of_every_message() -> None:
    """Texts, tool calls (name and JSON input) and tool results, in each message, the
    system prompt, and the answer's blocks: about four characters a token."""
    model = ScriptedModel(
        {"a": ["first", {"text": "abcd", "tool_calls": [{"name": "Rd", "input": {"k": 1}}]}]}
    )
    called = ChatMessage(
        role="assistant",
        content=(TextBlock(text="xy"), ToolUseBlock(id="t1", name="Read", input={"a": 1})),
    )
    convo = (user("abcd"), called, user(ToolResultBlock("t1", "12345678"), "zz"))
    resp = model.complete(request("a", *convo, system="sys4"))
    assert resp.text == "abcd" and [u.name for u in resp.tool_uses] == ["Rd"]  # turn 1
    # in: 4 (system) + 4 + 2 + 4 + 7 ('{"a":1}') + 8 + 2 = 31 -> 7; out: 4 + 2 + 7 -> 3
    assert resp.usage == Usage(input_tokens=7, output_tokens=3, model_calls=1)
    assert resp.stop_reason == "tool_use"


def test_stop_reason_override() -> None:
    model = ScriptedModel({"a": [{"text": "cut", "stop_reason": "max_tokens"}]})
    assert model.complete(request("a", user("t"))).stop_reason == "max_tokens"


def test_error_turn_always_fails() -> None:
    model = ScriptedModel(
        {"a": [{"error": {"kind": "overloaded", "message": "busy", "transient": True}}]}
    )
    for _ in range(3):
        with pytest.raises(ModelError) as info:
            model.complete(request("a", user("t")))
        assert info.value.kind == "overloaded"
        assert info.value.message == "busy"
        assert info.value.transient is True


def test_fail_times_counts_per_run_and_turn() -> None:
    model = ScriptedModel(
        {"a": [{"text": "recovered {run_id}", "error": {"kind": "server"}, "fail_times": 2}]}
    )
    for _ in range(2):
        with pytest.raises(ModelError) as info:
            model.complete(request("a", user("t"), run_id="r1"))
        assert info.value.kind == "server"
        assert info.value.transient is False
    assert model.complete(request("a", user("t"), run_id="r1")).text == "recovered r1"
    assert model.complete(request("a", user("t"), run_id="r1")).text == "recovered r1"
    # Another run has its own count.
    with pytest.raises(ModelError):
        model.complete(request("a", user("t"), run_id="r2"))


def test_fail_times_without_text_then_default_reply() -> None:
    model = ScriptedModel({"a": [{"error": {"kind": "server"}, "fail_times": 1}]})
    with pytest.raises(ModelError):
        model.complete(request("a", user("t")))
    assert model.complete(request("a", user("t"))).text == "a finished: t"


def test_delay_completes_when_not_cancelled() -> None:
    model = ScriptedModel({"a": [{"text": "slow", "delay": 0.05}]})
    waits = RecordedWaits()
    assert model.complete(request("a", user("t")), cancel=waits).text == "slow"
    assert waits.waits == [0.05]


def test_delay_cancelled_from_another_thread() -> None:
    model = ScriptedModel({"a": [{"text": "never", "delay": 30}]})
    cancel = threading.Event()
    started = threading.Event()
    outcome: list[BaseException | str] = []

    def call() -> None:
        started.set()
        try:
            outcome.append(model.complete(request("a", user("t")), cancel=cancel).text)
        except ModelError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert started.wait(60)
    cancel.set()
    thread.join(timeout=20)  # a cut delay returns at once; uncut, it would wait 30 s
    assert not thread.is_alive()
    assert len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, ModelError)
    assert error.kind == "cancelled"


def test_cancel_already_set_fails_at_once() -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ModelError) as info:
        ScriptedModel().complete(request("a", user("t")), cancel=cancel)
    assert info.value.kind == "cancelled"


def test_deadline_before_delay_ends_is_transient_timeout() -> None:
    model = ScriptedModel({"a": [{"text": "never", "delay": 30}]})
    waits = RecordedWaits()
    with pytest.raises(ModelError) as info:
        model.complete(request("a", user("t")), deadline=time.monotonic() + 0.05, cancel=waits)
    assert info.value.kind == "timeout"
    assert info.value.transient is True
    (waited,) = waits.waits  # only up to the deadline, not the 30 s delay
    assert waited is not None and waited <= 0.05


def test_deadline_already_passed() -> None:
    with pytest.raises(ModelError) as info:
        ScriptedModel().complete(request("a", user("t")), deadline=time.monotonic() - 1)
    assert info.value.kind == "timeout"


def test_requests_are_recorded() -> None:
    model = ScriptedModel()
    req = request("a", user("t"))
    model.complete(req)
    assert model.requests == (req,)


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ({"a": [{"txt": "typo"}]}, ["'a'", "turn 0", "txt"]),
        ({"a": ["ok", {"text": 3}]}, ["'a'", "turn 1", "$.text", "str"]),
        ({"a": [{"tool_calls": [{"input": {}}]}]}, ["turn 0", "name"]),
        ({"a": [{"tool_calls": [{"name": "x", "input": []}]}]}, ["turn 0", "tool_calls[0].input"]),
        ({"a": [{"text": "x", "delay": -1}]}, ["turn 0", "delay", "-1"]),
        ({"a": [{"text": "x", "fail_times": 1}]}, ["turn 0", "fail_times", "error"]),
        (
            {"a": [{"error": {"kind": "x"}, "fail_times": -2}]},
            ["turn 0", "fail_times", "-2"],
        ),
        ({"a": [{"text": "x", "stop_reason": "done"}]}, ["turn 0", "stop_reason", "'done'"]),
        ({"a": [{"text": "x", "usage": {"input_tokens": -5}}]}, ["input_tokens", "-5"]),
        ({"a": [{"delay": 1}]}, ["turn 0", "text", "tool_calls", "error"]),
        ({"a": [{"text": "x", "error": {"kinds": "x"}}]}, ["turn 0", "kinds"]),
        ({"a": [42]}, ["'a'", "turn 0", "int", "42"]),
        ({"a": "just text"}, ["'a'", "list of turns"]),
    ],
)
def test_bad_scripts_name_agent_turn_and_field(script: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ScriptError) as info:
        ScriptedModel(script)
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, (fragment, message)


def test_turn_objects_accepted() -> None:
    model = ScriptedModel({"a": [Turn(text="direct")]})
    assert model.complete(request("a", user("t"))).text == "direct"


def test_from_file_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "scripts.yaml"
    yaml_file.write_text(
        "lead:\n"
        "  - text: planning {task}\n"
        "    tool_calls:\n"
        "      - name: spawn_subagent\n"
        "        input: {agent: worker, task: 'part of {task}'}\n"
        "  - 'combined: {results}'\n"
        "worker:\n"
        "  - text: done\n"
    )
    model = ScriptedModel.from_file(yaml_file)
    assert model.agents == {"lead", "worker"}
    resp = model.complete(request("lead", user("X")))
    assert resp.text == "planning X"
    assert resp.tool_uses[0].input == {"agent": "worker", "task": "part of X"}

    json_file = tmp_path / "scripts.json"
    json_file.write_text(json.dumps({"w": [{"text": "j {agent}"}]}))
    assert ScriptedModel.from_file(json_file).complete(request("w", user("t"))).text == "j w"


def test_from_file_errors_name_the_file(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("a: [unclosed\n")
    with pytest.raises(ScriptError, match=r"bad\.yaml.*not valid YAML"):
        ScriptedModel.from_file(bad_yaml)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{nope")
    with pytest.raises(ScriptError, match=r"bad\.json.*not valid JSON"):
        ScriptedModel.from_file(bad_json)
    not_mapping = tmp_path / "list.yaml"
    not_mapping.write_text("- a\n- b\n")
    with pytest.raises(ScriptError, match=r"list\.yaml.*mapping of agent name"):
        ScriptedModel.from_file(not_mapping)
    bad_turn = tmp_path / "turn.yaml"
    bad_turn.write_text("a:\n  - text: ok\n  - {text: ok, delay: soon}\n")
    with pytest.raises(ScriptError, match=r"turn\.yaml: agent 'a', turn 1: .*delay"):
        ScriptedModel.from_file(bad_turn)
    with pytest.raises(ScriptError, match=r"missing\.yaml.*cannot read"):
        ScriptedModel.from_file(tmp_path / "missing.yaml")
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert ScriptedModel.from_file(empty).agents == frozenset()


def test_from_specs_reads_metadata_script() -> None:
    specs = [
        AgentSpec(name="a", description="d", metadata={"script": ["hello {task}"]}),
        AgentSpec(name="b", description="d"),
    ]
    model = ScriptedModel.from_specs(specs)
    assert model.agents == {"a"}
    assert model.complete(request("a", user("t"))).text == "hello t"
    assert model.complete(request("b", user("t"))).text == "b finished: t"


def test_from_specs_strict_bad_script_names_source_file() -> None:
    spec = AgentSpec(
        name="a", description="d", source="/x/agents/a.md", metadata={"script": [{"tex": "x"}]}
    )
    with pytest.raises(ScriptError) as info:
        ScriptedModel.from_specs([spec], strict=True)
    assert "/x/agents/a.md" in str(info.value)
    assert "turn 0" in str(info.value)
    assert "tex" in str(info.value)


def test_from_specs_bad_script_fails_only_that_agent() -> None:
    specs = [
        AgentSpec(
            name="bad",
            description="d",
            source="/x/agents/bad.md",
            metadata={"script": ["ok", {"text": "x", "delay": "soon"}]},
        ),
        AgentSpec(name="good", description="d", metadata={"script": ["fine {task}"]}),
    ]
    saved = structlog.get_config()
    structlog.reset_defaults()
    try:
        with structlog.testing.capture_logs() as logs:
            model = ScriptedModel.from_specs(specs)
    finally:
        structlog.configure(**saved)
    warnings = [e for e in logs if e["event"] == "scripted_model.bad_script"]
    assert [w["agent"] for w in warnings] == ["bad"]
    assert "/x/agents/bad.md" in warnings[0]["error"]
    assert model.complete(request("good", user("t"))).text == "fine t"
    with pytest.raises(ModelError) as info:
        model.complete(request("bad", user("t")))
    assert info.value.kind == "script"
    assert "/x/agents/bad.md" in info.value.message
    assert "turn 1" in info.value.message
    assert "delay" in info.value.message


def test_thread_safety_many_runs_at_once() -> None:
    model = ScriptedModel(
        {
            "a": [
                {"text": "ok {run_id}", "error": {"kind": "server"}, "fail_times": 3},
            ]
        }
    )
    runs = [f"run{i}" for i in range(40)]

    def drive(run_id: str) -> tuple[int, str]:
        failures = 0
        while True:
            try:
                return failures, model.complete(request("a", user("t"), run_id=run_id)).text
            except ModelError:
                failures += 1

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(drive, runs))
    assert results == [(3, f"ok {r}") for r in runs]
    assert len(model.requests) == 4 * len(runs)


def test_placeholder_values_are_worked_out_only_for_a_template_that_uses_them() -> None:
    from subagents.models.templating import LazyValues, render

    def unreadable() -> dict[str, str]:
        raise AssertionError("values read for a template without placeholders")

    assert render("plain text, no braces", LazyValues(unreadable)) == "plain text, no braces"
    calls: list[int] = []

    def values() -> dict[str, str]:
        calls.append(1)
        return {"task": "T"}

    lazy = LazyValues(values)
    assert (
        render("{task} and {task}; {{literal}} {unknown}", lazy) == "T and T; {literal} {unknown}"
    )
    assert render("again {task}", lazy) == "again T"
    assert calls == [1]  # worked out once
    assert dict(lazy) == {"task": "T"} and len(lazy) == 1
