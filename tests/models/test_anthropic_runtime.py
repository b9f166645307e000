"""The whole runtime on Claude's API (the real SDK) against the local fake Messages API.

A lead fans out to two workers with two parallel ``tool_use`` calls; each worker calls a user
tool, then answers; the lead combines. One worker call meets a 529 first (retried inside the
backend). Asserts on what the server received as well as on the outcome.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from fake_messages_api import (
    FakeMessagesAPI,
    Recorded,
    Reply,
    error_reply,
    text_message,
    tool_use_message,
)
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
from subagents.models import AnthropicModel, RetryPolicy
from subagents.runtime import Runtime

LEAD_PROMPT = "You are LEAD. Split the task between two workers."
WORKER_PROMPT = "You are WORKER. Look things up, then answer."

AGENTS = [
    AgentSpec(name="lead", description="Splits work.", prompt=LEAD_PROMPT, model="opus"),
    AgentSpec(
        name="worker",
        description="Does one part.",
        prompt=WORKER_PROMPT,
        model="haiku",
        tools=("lookup",),
    ),
]


def lookup(key: str) -> str:
    """Look a key up in the test's table."""
    return {"alpha": "ALPHA-VALUE", "beta": "BETA-VALUE"}.get(key, "unknown")


def system_text(req: Recorded) -> str:
    return "".join(block["text"] for block in req.body.get("system", []))


def tool_results(req: Recorded) -> list[dict[str, Any]]:
    last = req.body["messages"][-1]
    return [b for b in last["content"] if b.get("type") == "tool_result"]


class Conversation:
    """Serves both agents by looking at each request, like the real API would."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.overloaded_once = False

    def __call__(self, req: Recorded) -> Reply | dict[str, Any]:
        system = system_text(req)
        results = tool_results(req)
        if "LEAD" in system:
            if not results:
                return tool_use_message(
                    [
                        ("toolu_lead_1", "spawn_subagent", {"agent": "worker", "task": "alpha"}),
                        ("toolu_lead_2", "spawn_subagent", {"agent": "worker", "task": "beta"}),
                    ],
                    text="Two workers.",
                    model="claude-opus-5-5",
                    input_tokens=100,
                    output_tokens=20,
                )
            joined = " | ".join(r["content"] for r in results)
            return text_message(f"combined: {joined}", model="claude-opus-5-5", input_tokens=300)
        # A worker: its task is in the first user message.
        task = req.body["messages"][0]["content"][0]["text"]
        key = "alpha" if "alpha" in task else "beta"
        if not results:
            with self.lock:
                first = not self.overloaded_once
                self.overloaded_once = True
            if first:
                return error_reply(529, "overloaded_error", "Overloaded")
            return tool_use_message(
                [(f"toolu_{key}", "lookup", {"key": key})], model="claude-haiku-5-5"
            )
        return text_message(f"{key}={results[0]['content']}", model="claude-haiku-5-5")


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI(handler=Conversation()) as server:
        yield server


def test_fan_out_through_the_whole_runtime(api: FakeMessagesAPI) -> None:
    model = AnthropicModel(
        api_key="test-key",
        base_url=api.url,
        retry=RetryPolicy(max_attempts=3, base_wait=0.01, max_wait=0.05),
    )
    with Runtime(AGENTS, model=model, tools=[lookup]) as rt:
        outcome = rt.run("lead", "look up alpha and beta", wait=30)
    model.close()

    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.result is not None
    assert outcome.result.startswith("combined: ")
    assert "alpha=ALPHA-VALUE" in outcome.result
    assert "beta=BETA-VALUE" in outcome.result

    sent = api.requests
    lead = [r for r in sent if "LEAD" in system_text(r)]
    workers = [r for r in sent if "WORKER" in system_text(r)]
    assert len(lead) == 2
    assert len(workers) == 5  # 2 workers x 2 calls, plus one 529 retried
    for req in sent:
        assert req.headers["authorization"] == "Bearer test-key"
        assert req.headers["anthropic-version"]
        assert "temperature" not in req.body
        assert isinstance(req.body["max_tokens"], int)
        assert req.body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert req.body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert all("cache_control" not in t for t in req.body["tools"][:-1])
    assert {r.body["model"] for r in lead} == {"claude-opus-5-5"}
    assert {r.body["model"] for r in workers} == {"claude-haiku-5-5"}

    # The lead is offered spawn_subagent; a worker only its lookup tool (its `tools` list).
    assert "spawn_subagent" in [t["name"] for t in lead[0].body["tools"]]
    assert [t["name"] for t in workers[-1].body["tools"]] == ["lookup"]

    # The lead's second call: both results in ONE user message, before any text.
    msgs = lead[1].body["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert [b["type"] for b in msgs[1]["content"]] == ["text", "tool_use", "tool_use"]
    kinds = [b["type"] for b in msgs[2]["content"]]
    assert kinds[:2] == ["tool_result", "tool_result"]
    assert "tool_result" not in kinds[2:]
    assert [b["tool_use_id"] for b in msgs[2]["content"][:2]] == ["toolu_lead_1", "toolu_lead_2"]
    # The children ran in parallel: both workers' first calls came before the lead's second.
    worker_firsts = [r for r in workers if not tool_results(r)]
    assert max(r.received_at for r in worker_firsts) < lead[1].received_at

    # Usage rolled up from the API's counters: the lead's own calls plus its children.
    usage = outcome.usage
    assert usage.model_calls >= 2
    assert usage.input_tokens >= 400  # the lead's two calls alone: 100 + 300
    assert usage.cost_usd > 0


def test_runtime_run_fails_cleanly_on_401(api: FakeMessagesAPI) -> None:
    api.handler = lambda req: error_reply(401, "authentication_error", "invalid key")
    model = AnthropicModel(api_key="bad", base_url=api.url)
    with Runtime(AGENTS, model=model, tools=[lookup]) as rt:
        outcome = rt.run("worker", "alpha", wait=30)
    model.close()
    assert outcome.status is RunStatus.FAILED
    assert outcome.error_kind in ("auth", "model_auth")  # the runtime may prefix the layer
    assert outcome.error is not None
    assert "ANTHROPIC_API_KEY" in outcome.error
    assert len(api.requests) == 1  # not retried: an auth error is final
