"""A Messages API server (real HTTP, the real SDK) whose tool_use ids are hostile: each call
runs once and its answer goes back under the very id the server gave, whatever the id holds
(``approve:``, ``#fan0``, ``~``, ``@``, unicode, NUL, 70,000 characters); an id the SDK
cannot take (empty, a lone surrogate) fails the run at once, naming why, one request made.

tests/behaviour/test_hostile_tool_ids.py holds the same through the scripted model; here the
ids cross the SDK's parsing and the request the next turn sends."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from fake_messages_api import FakeMessagesAPI, Recorded, text_message, tool_use_message
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
from subagents.models import AnthropicModel
from subagents.runtime import Runtime

WAIT_S = 120.0
IDS = ("#fan0", "\u00e9", "approve:x", "x" * 70_000, "~", "approve:x@0.1", "a\x00b", "toolu_a@0.1")
"""A spawn, an echo and a mail per three: the spawns' under ``#fan0`` (else read as a fan_out's
child) and the mails' under ``approve:`` (else read as an approval's) are the ids the escape
in ``request_ids`` is there for; with them the other way round the test passed unescaped."""
AGENTS = [
    AgentSpec(name="lead", description="l", prompt="LEAD"),
    AgentSpec(name="worker", description="w", prompt="WORKER"),
]


def echo(text: str) -> str:
    """Echo the text."""
    return f"echo {text}"


class Server:
    """The lead's first turn: a spawn, an echo and a mail per three ids; then it ends."""

    def __init__(self, ids: tuple[str, ...]) -> None:
        self.ids = ids
        self.lock = threading.Lock()
        self.lead_asks: list[dict[str, Any]] = []

    def __call__(self, req: Recorded) -> dict[str, Any]:
        system = "".join(b["text"] for b in req.body.get("system", []))
        if "WORKER" in system:
            return text_message("worker done")
        messages = req.body["messages"]
        with self.lock:
            self.lead_asks.append(messages[-1])
        if not any(m["role"] == "assistant" for m in messages):
            return tool_use_message(_calls(self.ids))
        return text_message("lead done")


def _calls(ids: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any]]]:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    for i, use_id in enumerate(ids):
        if i % 3 == 0:
            calls.append((use_id, "spawn_subagent", {"agent": "worker", "task": f"t{i}"}))
        elif i % 3 == 1:
            calls.append((use_id, "echo", {"text": f"e{i}"}))
        else:
            calls.append((use_id, "send_message", {"to": "worker", "content": f"m{i}"}))
    return calls


def _run(ids: tuple[str, ...]) -> tuple[Any, Server, int]:
    server = Server(ids)
    with FakeMessagesAPI(handler=server) as api:
        model = AnthropicModel(api_key="k", base_url=api.url)
        with Runtime(AGENTS, model=model, tools=[echo], permissions="bypassPermissions") as rt:
            outcome = rt.run("lead", "go", wait=WAIT_S)
        return outcome, server, len(api.requests)


def test_each_hostile_id_is_answered_once_under_itself() -> None:
    outcome, server, _ = _run(IDS)
    assert outcome.status is RunStatus.COMPLETED, outcome.error
    [answers] = server.lead_asks[1:]  # the one request after the tool calls
    results = [b for b in answers["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == list(IDS)
    said = {r["tool_use_id"]: json.dumps(r["content"]) for r in results}
    for i, use_id in enumerate(IDS):
        # a mail's answer: sent, dead, or (two workers live at once, under load) the name
        # ambiguous: each is the mail's own, none a spawn's or an echo's
        whats = (("worker done",), (f"echo e{i}",), ("mail", "'worker' is ambiguous"))[i % 3]
        assert any(what in said[use_id] for what in whats), (i, said[use_id][:200])


@pytest.mark.parametrize(
    ("use_id", "why"),
    [
        ("", "tool_use block without an `id`"),
        ("\ud800", "surrogates not allowed"),
    ],
)
def test_an_id_the_sdk_cannot_take_fails_the_run_at_once_naming_why(use_id: str, why: str) -> None:
    outcome, _, requests = _run((use_id,))
    assert (outcome.status, outcome.error_kind) == (RunStatus.FAILED, "model_malformed_response")
    assert why in (outcome.error or "")
    assert requests == 1  # not retried
