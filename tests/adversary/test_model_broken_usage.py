"""A Messages API server (real HTTP, the real SDK) that reports a negative count of tokens:
a broken server, a proxy's bug. The count was taken as spend given back: a run on a token
budget was credited with it, its record read ``-105`` tokens and a negative cost. It is a
malformed response now, failing the run at once (not retried), naming the field.

Tried and held (session 28, no test of their own): two tool calls under one id in a turn
(the second answered as ``ID_2``, a warning logged), a call to a tool the agent lacks, input
of the wrong type or missing a field (each an error result the model reads), an unknown
content block, an unknown ``stop_reason`` (a malformed response), an empty content, NUL and
astral characters in a text, counts of 10**30 tokens (``budget_exceeded``, recorded whole)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_messages_api import FakeMessagesAPI, Reply, message
from subagents.definitions.spec import AgentSpec
from subagents.messages import ChatMessage, ModelRequest, RunStatus, TextBlock
from subagents.models import AnthropicModel, ModelError
from subagents.runtime import Runtime

WAIT_S = 120.0
NEGATIVE = [
    {"input_tokens": -100},
    {"output_tokens": -5},
    {"cache_read_input_tokens": -1},
    {"cache_creation_input_tokens": -1},
]


ASKED = ModelRequest(
    model="sonnet",
    system="s",
    messages=(ChatMessage(role="user", content=(TextBlock(text="t"),)),),
    tools=(),
    max_tokens=64,
    agent="lead",
    run_id="run1",
)
"""One ask of the model (its answer is the test's)."""


def _answer(counts: dict[str, int]) -> dict[str, object]:
    return message([{"type": "text", "text": "hi"}], **counts)  # type: ignore[arg-type]


@pytest.mark.parametrize("counts", NEGATIVE, ids=lambda c: next(iter(c)))
def test_a_negative_count_of_tokens_is_a_malformed_response(counts: dict[str, int]) -> None:
    """Answered in one body (not streamed): refused at once, naming the field."""
    with FakeMessagesAPI([Reply(body=_answer(counts)), _answer({})]) as api:
        model = AnthropicModel(api_key="k", base_url=api.url)
        with pytest.raises(ModelError) as info:
            model.complete(ASKED)
        assert len(api.requests) == 1  # not retried
    assert info.value.kind == "malformed_response"
    assert f"$.usage.{next(iter(counts))}" in str(info.value)


def test_a_run_on_a_budget_is_not_credited_with_negative_spend(tmp_path: Path) -> None:
    """Through the runtime (the model streamed, a SQLite store): the run fails naming the
    field, its record holds no negative tokens, and the runtime goes on serving."""
    agents = [AgentSpec(name="lead", description="l", prompt="LEAD")]
    replies = [_answer({"input_tokens": -100, "output_tokens": -5}), _answer({})]
    with FakeMessagesAPI(replies) as api:
        model = AnthropicModel(api_key="k", base_url=api.url)
        with Runtime(agents, model=model, store=tmp_path / "runs.db") as rt:
            broken = rt.run("lead", "go", wait=WAIT_S, token_budget=1000)
            after = rt.run("lead", "again", wait=WAIT_S, token_budget=1000)
            record = rt.store.get_run(broken.run_id)
    assert (broken.status, broken.error_kind) == (RunStatus.FAILED, "model_malformed_response")
    assert "$.usage.input_tokens" in (broken.error or "")
    assert record is not None and record.usage.input_tokens >= 0 and record.usage.cost_usd >= 0
    assert after.status is RunStatus.COMPLETED, after.error
    assert after.usage.input_tokens == 10  # the next answer's counts, as given


def _streamed(start_usage: dict[str, object], delta_usage: dict[str, object]) -> Reply:
    """A streamed answer shaped as the API sends one: counts at the start, the rest (some
    null, as the API's later deltas give them) at the end."""
    start = {
        "id": "msg_real",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    ending = {"stop_reason": "end_turn", "stop_sequence": None}
    return Reply(
        events=(
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "hi"},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": ending, "usage": delta_usage}),
            ("message_stop", {"type": "message_stop"}),
        )
    )


REAL = {
    "zeros, nulls": (
        {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
            "service_tier": "standard",
        },
        {
            "output_tokens": 0,
            "input_tokens": None,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
            "server_tool_use": None,
        },
    ),
    "no cache fields": ({"input_tokens": 7, "output_tokens": 1}, {"output_tokens": 3}),
    "cache fields at the end": (
        {"input_tokens": 7, "output_tokens": 1, "cache_creation": {"ephemeral_5m_input_tokens": 0}},
        {"output_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 20},
    ),
}


@pytest.mark.parametrize("usages", REAL.values(), ids=list(REAL))
def test_counts_as_the_api_sends_them_are_taken(
    usages: tuple[dict[str, object], dict[str, object]],
) -> None:
    """Zero counts, cache fields missing or null, fields we do not read: what a real
    response holds is never refused (the refusal is only of a negative count)."""
    start, delta = usages
    with FakeMessagesAPI([_streamed(start, delta)]) as api:
        model = AnthropicModel(api_key="k", base_url=api.url)
        answer = model.complete(ASKED)
    assert answer.usage.input_tokens == start["input_tokens"]
    assert answer.usage.output_tokens == delta["output_tokens"]
    assert answer.usage.cache_read_input_tokens == (delta.get("cache_read_input_tokens") or 0)
