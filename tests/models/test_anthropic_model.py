"""AnthropicModel with the real SDK against a local server that speaks the Messages API."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from fake_messages_api import (
    FakeMessagesAPI,
    Recorded,
    Reply,
    error_reply,
    message,
    text_message,
    tool_use_message,
)
from recorded_waits import RecordedWaits
from subagents.messages import (
    ChatMessage,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolSchema,
    ToolUseBlock,
)
from subagents.models import AnthropicModel, Model, ModelError, RetryPolicy

FAST = RetryPolicy(max_attempts=3, base_wait=0.01, max_wait=0.05)

SPAWN = ToolSchema(
    name="spawn_subagent",
    description="Start a child agent.",
    input_schema={
        "type": "object",
        "properties": {"agent": {"type": "string"}, "task": {"type": "string"}},
        "required": ["agent", "task"],
    },
)
READ = ToolSchema(
    name="read_file",
    description="Read a file.",
    input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
)


def user(*blocks: TextBlock | ToolResultBlock | str) -> ChatMessage:
    content = tuple(TextBlock(text=b) if isinstance(b, str) else b for b in blocks)
    return ChatMessage(role="user", content=content)


def request(*messages: ChatMessage, model: str = "sonnet", **kwargs: Any) -> ModelRequest:
    return ModelRequest(
        model=model,
        system=kwargs.pop("system", "You are the lead."),
        messages=messages,
        tools=kwargs.pop("tools", (SPAWN, READ)),
        max_tokens=kwargs.pop("max_tokens", 1024),
        agent="lead",
        run_id="run1",
        **kwargs,
    )


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        yield server


@pytest.fixture
def model(api: FakeMessagesAPI) -> Iterator[AnthropicModel]:
    with AnthropicModel(api_key="test-key", base_url=api.url, retry=FAST) as m:
        yield m


def test_is_a_model(model: AnthropicModel) -> None:
    assert isinstance(model, Model)


def test_multi_turn_tool_use_then_results(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    def handler(req: Recorded) -> dict[str, Any]:
        last = req.body["messages"][-1]
        if any(b.get("type") == "tool_result" for b in last["content"]):
            results = [b["content"] for b in last["content"] if b["type"] == "tool_result"]
            return text_message("combined: " + " + ".join(results), input_tokens=50)
        return tool_use_message(
            [
                ("toolu_1", "spawn_subagent", {"agent": "a", "task": "part 1"}),
                ("toolu_2", "spawn_subagent", {"agent": "b", "task": "part 2"}),
                ("toolu_3", "read_file", {"path": "x.txt"}),
            ],
            text="Fanning out.",
        )

    api.handler = handler
    first = user("Build the thing.")
    resp1 = model.complete(request(first), deadline=time.monotonic() + 10)
    assert resp1.stop_reason == "tool_use"
    assert resp1.text == "Fanning out."
    assert [(u.id, u.name, u.input) for u in resp1.tool_uses] == [
        ("toolu_1", "spawn_subagent", {"agent": "a", "task": "part 1"}),
        ("toolu_2", "spawn_subagent", {"agent": "b", "task": "part 2"}),
        ("toolu_3", "read_file", {"path": "x.txt"}),
    ]
    assistant = ChatMessage(role="assistant", content=resp1.content)
    # The runtime puts every result in one user message; a mail text may be there too.
    results = user(
        ToolResultBlock(tool_use_id="toolu_1", content="A done"),
        "<mail>a note that arrived meanwhile</mail>",
        ToolResultBlock(tool_use_id="toolu_2", content="B done"),
        ToolResultBlock(tool_use_id="toolu_3", content="no such file", is_error=True),
    )
    resp2 = model.complete(request(first, assistant, results), deadline=time.monotonic() + 10)
    assert resp2.stop_reason == "end_turn"
    assert resp2.text == "combined: A done + B done + no such file"
    assert resp2.usage.input_tokens == 50

    sent = api.requests
    assert len(sent) == 2
    for req in sent:
        assert req.path == "/v1/messages"
        assert req.headers["anthropic-version"] == "2026-10-21"
        assert req.headers["authorization"] == "Bearer test-key"
        assert req.body["model"] == "claude-sonnet-5-5"
        assert req.body["max_tokens"] == 1024
        assert "temperature" not in req.body
        assert req.body["system"] == [
            {"type": "text", "text": "You are the lead.", "cache_control": {"type": "ephemeral"}}
        ]
        tools = req.body["tools"]
        assert [t["name"] for t in tools] == ["spawn_subagent", "read_file"]
        assert "cache_control" not in tools[0]
        assert tools[1]["cache_control"] == {"type": "ephemeral"}
        assert tools[0]["input_schema"] == SPAWN.input_schema
    msgs = sent[1].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"] == [{"type": "text", "text": "Build the thing."}]
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use", "tool_use", "tool_use"]
    assert msgs[1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "spawn_subagent",
        "input": {"agent": "a", "task": "part 1"},
    }
    kinds = [b["type"] for b in msgs[2]["content"]]
    assert kinds == ["tool_result", "tool_result", "tool_result", "text"]
    assert [b["tool_use_id"] for b in msgs[2]["content"][:3]] == ["toolu_1", "toolu_2", "toolu_3"]
    assert msgs[2]["content"][2]["is_error"] is True
    assert msgs[2]["content"][0]["is_error"] is False


def test_no_system_no_tools_omits_them(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(text_message("hi"))
    model.complete(request(user("t"), system="", tools=()))
    body = api.requests[0].body
    assert "system" not in body
    assert "tools" not in body


def test_full_model_id_passes_through(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(text_message("hi", model="claude-opus-4-8"))
    resp = model.complete(request(user("t"), model="claude-opus-4-8"))
    assert api.requests[0].body["model"] == "claude-opus-4-8"
    assert resp.model == "claude-opus-4-8"


def test_usage_and_cost(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(
        text_message(
            "hi",
            model="claude-opus-5-5",
            input_tokens=1_000_000,
            output_tokens=100_000,
            cache_creation_input_tokens=1_000_000,
            cache_read_input_tokens=1_000_000,
        )
    )
    usage = model.complete(request(user("t"), model="opus")).usage
    assert usage.input_tokens == 1_000_000
    assert usage.output_tokens == 100_000
    assert usage.cache_creation_input_tokens == 1_000_000
    assert usage.cache_read_input_tokens == 1_000_000
    assert usage.model_calls == 1
    # opus 4/20 per Mtok: 4 + 2 + 4*1.25 + 4*0.1
    assert usage.cost_usd == pytest.approx(4 + 2 + 5 + 0.4)


def test_429_honours_retry_after(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(
        error_reply(429, "rate_limit_error", "slow down", headers={"retry-after": "1"}),
        text_message("ok"),
    )
    waits = RecordedWaits()
    answer = model.complete(request(user("t")), deadline=time.monotonic() + 10, cancel=waits)
    assert answer.text == "ok"
    assert len(api.requests) == 2
    assert waits.waits == [1.0]  # the server's wait, not our own backoff (at most 0.05 s)


def test_429_honours_retry_after_ms(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(
        error_reply(
            429, "rate_limit_error", "slow", headers={"retry-after-ms": "300", "retry-after": "9"}
        ),
        text_message("ok"),
    )
    waits = RecordedWaits()
    answer = model.complete(request(user("t")), deadline=time.monotonic() + 10, cancel=waits)
    assert answer.text == "ok"
    assert len(api.requests) == 2
    assert waits.waits == [0.3]  # retry-after-ms is the finer of the two


def test_retry_after_beyond_deadline_fails_at_once(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(error_reply(429, "rate_limit_error", "quota", headers={"retry-after": "30"}))
    waits = RecordedWaits()
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")), deadline=time.monotonic() + 2, cancel=waits)
    assert info.value.kind == "rate_limited"
    assert info.value.transient is True
    assert "deadline" in info.value.message
    assert "quota" in info.value.message
    assert len(api.requests) == 1
    assert waits.waits == []  # a wait that would end past the deadline is not started


def test_529_then_success(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(error_reply(529, "overloaded_error", "Overloaded"), text_message("ok"))
    assert model.complete(request(user("t"))).text == "ok"
    assert len(api.requests) == 2


def test_500_exhausts_attempts(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(*[error_reply(500, "api_error", "boom") for _ in range(5)])
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")), deadline=time.monotonic() + 10)
    assert info.value.kind == "server"
    assert info.value.transient is True
    assert "HTTP 500: boom" in info.value.message
    assert "3 attempt" in info.value.message
    assert len(api.requests) == FAST.max_attempts


def test_529_exhausted_is_overloaded(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(*[error_reply(529, "overloaded_error", "Overloaded") for _ in range(3)])
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")))
    assert info.value.kind == "overloaded"
    assert len(api.requests) == 3


def test_dropped_connection_is_retried(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(Reply(drop=True), text_message("ok"))
    # a deadline far off (a hang guard, not a timing): the retry happens within it
    assert model.complete(request(user("t")), deadline=time.monotonic() + 600).text == "ok"
    assert len(api.requests) == 2


def test_dropped_every_time_is_connection_error(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(*[Reply(drop=True) for _ in range(3)])
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")))
    assert info.value.kind == "connection"
    assert info.value.transient is True
    assert len(api.requests) == 3


def test_response_slower_than_deadline_times_out(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(*[Reply(body=text_message("late"), delay=30) for _ in range(5)])
    errors: list[BaseException] = []

    def call() -> None:
        try:
            model.complete(request(user("t")), deadline=time.monotonic() + 0.5)
        except BaseException as exc:
            errors.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(20.0)  # each reply takes 30 s: only a call cut at its deadline returns
    assert not caller.is_alive()
    (error,) = errors
    assert isinstance(error, ModelError)
    assert error.kind == "timeout"
    assert error.transient is True
    assert 1 <= len(api.requests) <= FAST.max_attempts


def test_deadline_already_passed_sends_nothing(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")), deadline=time.monotonic() - 1)
    assert info.value.kind == "timeout"
    assert api.requests == []


@pytest.mark.parametrize(
    "body",
    [
        "this is not json{",
        '{"type": "message", "role": "assistant", "content": "oops", "stop_reason": "end_turn",'
        ' "usage": {"input_tokens": 1, "output_tokens": 1}}',
        '{"type": "message", "role": "assistant", "content": [], "usage": {}}',
        '{"type": "message", "role": "assistant", "content": [{"type": "tool_use", "id": "t",'
        ' "name": "x", "input": "str"}], "stop_reason": "tool_use", "usage": {}}',
    ],
)
def test_malformed_body_fails_without_retry(
    api: FakeMessagesAPI, model: AnthropicModel, body: str
) -> None:
    api.add(Reply(body=body), text_message("never used"))
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")))
    assert info.value.kind == "malformed_response"
    assert len(api.requests) == 1


def test_401_names_the_key_and_is_not_retried(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(error_reply(401, "authentication_error", "invalid x-api-key"), text_message("no"))
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")))
    assert info.value.kind == "auth"
    assert info.value.transient is False
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert "invalid x-api-key" in str(info.value)
    assert len(api.requests) == 1


@pytest.mark.parametrize(
    ("status", "error_type", "kind", "hint"),
    [
        (400, "invalid_request_error", "bad_request", "max_tokens: too large"),
        (400, "invalid_request_error", "context_window", "prompt is too long: 300000 tokens"),
        (403, "permission_error", "permission", "ANTHROPIC_API_KEY"),
        (404, "not_found_error", "not_found", "claude-sonnet-5-5"),
    ],
)
def test_client_errors_fail_at_once(
    api: FakeMessagesAPI,
    model: AnthropicModel,
    status: int,
    error_type: str,
    kind: str,
    hint: str,
) -> None:
    text = "max_tokens: too large" if kind == "bad_request" else "nope"
    if kind == "context_window":
        text = "prompt is too long: 300000 tokens"
    api.add(error_reply(status, error_type, text), text_message("no"))
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")))
    assert info.value.kind == kind
    assert f"HTTP {status}" in info.value.message
    assert hint in info.value.message
    assert "request-id req_fake_" in info.value.message
    assert len(api.requests) == 1


def test_max_tokens_is_returned(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(text_message("cut sh", stop_reason="max_tokens"))
    resp = model.complete(request(user("t")))
    assert resp.stop_reason == "max_tokens"
    assert resp.text == "cut sh"


def test_refusal_and_context_window_stop_reasons(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(
        text_message("I can't help with that.", stop_reason="refusal"),
        message([], stop_reason="model_context_window_exceeded"),
        text_message("?", stop_reason="something_new"),
    )
    with pytest.raises(ModelError) as refusal:
        model.complete(request(user("t")))
    assert refusal.value.kind == "refusal"
    assert "I can't help with that." in refusal.value.message
    with pytest.raises(ModelError) as window:
        model.complete(request(user("t")))
    assert window.value.kind == "context_window"
    with pytest.raises(ModelError) as unknown:
        model.complete(request(user("t")))
    assert unknown.value.kind == "malformed_response"
    assert "something_new" in unknown.value.message


def test_pause_turn_is_continued(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    paused: list[dict[str, Any]] = [
        {"type": "text", "text": "Searching."},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
    ]
    api.add(
        message(paused, stop_reason="pause_turn", input_tokens=10, output_tokens=3),
        text_message("Found it.", input_tokens=20, output_tokens=4),
    )
    resp = model.complete(request(user("find x")))
    assert resp.stop_reason == "end_turn"
    assert resp.content == (TextBlock(text="Searching."), TextBlock(text="Found it."))
    assert resp.usage.input_tokens == 30
    assert resp.usage.output_tokens == 7
    assert resp.usage.model_calls == 2
    first, second = api.requests
    assert len(first.body["messages"]) == 1
    msgs = second.body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[1]["content"] == paused  # sent back exactly as received


def test_pause_turn_is_bounded(api: FakeMessagesAPI) -> None:
    with AnthropicModel(
        api_key="k", base_url=api.url, retry=FAST, max_pause_continuations=2
    ) as bounded:
        api.handler = lambda req: text_message("more", stop_reason="pause_turn")
        resp = bounded.complete(request(user("t")))
    assert resp.stop_reason == "pause_turn"
    assert len(api.requests) == 3
    assert resp.usage.model_calls == 3


def test_cancel_during_backoff_returns_promptly(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    arrived = threading.Event()

    def handler(req: Recorded) -> Reply:
        arrived.set()
        return error_reply(429, "rate_limit_error", "wait", headers={"retry-after": "30"})

    api.handler = handler
    cancel = threading.Event()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            model.complete(request(user("t")), deadline=time.monotonic() + 60, cancel=cancel)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    assert arrived.wait(60)
    cancel.set()
    thread.join(timeout=20)  # a cut call returns at once; uncut, it would wait 30 s
    assert not thread.is_alive()
    assert len(outcome) == 1
    error = outcome[0]
    assert isinstance(error, ModelError)
    assert error.kind == "cancelled"
    assert len(api.requests) == 1


def test_cancel_before_call_sends_nothing(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")), cancel=cancel)
    assert info.value.kind == "cancelled"
    assert api.requests == []


def test_concurrent_calls_share_one_model(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.handler = lambda req: text_message(req.body["messages"][0]["content"][0]["text"])
    results: dict[int, str] = {}
    lock = threading.Lock()

    def call(i: int) -> None:
        text = model.complete(request(user(f"task {i}"))).text
        with lock:
            results[i] = text

    threads = [threading.Thread(target=call, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert results == {i: f"task {i}" for i in range(12)}


def test_configuration_from_environment(
    api: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    monkeypatch.setenv("SUBAGENTS_MODEL", "haiku")
    api.add(text_message("ok"))
    with AnthropicModel(retry=FAST) as env_model:
        assert env_model.default_model == "claude-haiku-5-5"
        env_model.complete(request(user("t"), model=""))
        api.add(text_message("ok"))
        env_model.complete(request(user("t"), model="inherit"))
    sent = api.requests
    assert sent[0].headers["authorization"] == "Bearer env-key"
    assert [r.body["model"] for r in sent] == ["claude-haiku-5-5", "claude-haiku-5-5"]


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelError) as info:
        AnthropicModel()
    assert info.value.kind == "auth"
    assert "ANTHROPIC_API_KEY" in str(info.value)


def test_tool_use_block_round_trip_ids(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(tool_use_message([("toolu_9", "read_file", {"path": "a"})]))
    resp = model.complete(request(user("t")))
    assert resp.content == (ToolUseBlock(id="toolu_9", name="read_file", input={"path": "a"}),)


def test_large_max_tokens_without_deadline(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    # Without an explicit timeout the SDK refuses non-streaming calls this large.
    api.add(text_message("ok"))
    assert model.complete(request(user("t"), max_tokens=64_000)).text == "ok"
    assert api.requests[0].body["max_tokens"] == 64_000


def test_x_should_retry_header_is_obeyed(api: FakeMessagesAPI, model: AnthropicModel) -> None:
    api.add(
        error_reply(529, "overloaded_error", "hard limit", headers={"x-should-retry": "false"}),
        error_reply(400, "invalid_request_error", "try me", headers={"x-should-retry": "true"}),
        text_message("ok"),
    )
    with pytest.raises(ModelError) as info:
        model.complete(request(user("t")))
    assert info.value.kind == "overloaded"
    assert info.value.transient is False
    assert "not to retry" in info.value.message
    assert len(api.requests) == 1
    assert model.complete(request(user("t"))).text == "ok"
    assert len(api.requests) == 3


def test_cost_uses_requested_model_when_api_answers_a_dated_id(
    api: FakeMessagesAPI, model: AnthropicModel
) -> None:
    api.add(text_message("hi", model="claude-haiku-5-5-20261001", input_tokens=1_000_000))
    resp = model.complete(request(user("t"), model="haiku"))
    assert resp.model == "claude-haiku-5-5-20261001"
    assert resp.usage.cost_usd == pytest.approx(0.10 + 5 * 0.50 / 1_000_000)
