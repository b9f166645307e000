"""Streaming through the whole runtime, on the real SDK against the local Messages API.

A run streamed and the same run not streamed (its model wrapped so that it cannot stream)
keep the same history in SQLite: the same conversation, the same events; ``text_delta``
events are published to subscribers but never stored, and no preview is left once the run
has ended. A stream that breaks half way is retried whole: subscribers see the failed
attempt's pieces declared void, and the history is the same as if it had not broken.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_messages_api import (
    FakeMessagesAPI,
    Recorded,
    Reply,
    streamed,
    text_message,
    tool_use_message,
)
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, ModelRequest, ModelResponse, RunStatus
from subagents.models import AnthropicModel, RetryPolicy
from subagents.models.base import CancelSignal
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore

WRITER = AgentSpec(
    name="writer", description="Writes.", prompt="You are WRITER.", tools=("lookup",)
)
FIRST = "I will look the key up before I answer, to be sure of it."
LAST = "The value of alpha is ALPHA-VALUE, as the table says."


def lookup(key: str) -> str:
    """Look a key up in the test's table."""
    return {"alpha": "ALPHA-VALUE"}.get(key, "unknown")


class Turns:
    """The writer's two turns, chosen by what the request holds; ``break_first``: the first
    call's stream breaks half way (an overloaded_error event) once."""

    def __init__(self, *, break_first: bool = False) -> None:
        self.lock = threading.Lock()
        self.break_first = break_first

    def __call__(self, req: Recorded) -> Reply | dict[str, Any]:
        if len(req.body["messages"]) == 1:
            turn = tool_use_message([("toolu_w1", "lookup", {"key": "alpha"})], text=FIRST)
            with self.lock:
                broken, self.break_first = self.break_first, False
            return streamed(turn, chunk=6, error_after=7) if broken else turn
        return text_message(LAST)


class Unstreamed:
    """A user's model that only completes (it has no ``stream``): the runtime cannot
    stream it, whatever the wire does."""

    def __init__(self, model: AnthropicModel) -> None:
        self.model = model

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        return self.model.complete(request, deadline=deadline, cancel=cancel)


@pytest.fixture
def api() -> Iterator[FakeMessagesAPI]:
    with FakeMessagesAPI() as server:
        server.chunk = 6
        yield server


def run_writer(api: FakeMessagesAPI, path: Path, *, stream: bool, turns: Turns) -> dict[str, Any]:
    """One run of the writer; what the store keeps of it and the events published."""
    api.handler = turns
    published: list[Event] = []
    model = AnthropicModel(
        api_key="k", base_url=api.url, retry=RetryPolicy(max_attempts=3, base_wait=0.01)
    )
    store = SQLiteStore(path)
    with Runtime([WRITER], model=model if stream else Unstreamed(model), tools=[lookup],
                 store=store) as rt:  # fmt: skip
        rt.subscribe(published.append)
        outcome = rt.run("writer", "what is alpha?", wait=30)
    model.close()
    assert outcome.status is RunStatus.COMPLETED, outcome
    run_id = outcome.run_id
    kept = {
        "result": outcome.result,
        "messages": store.load_checkpoint(run_id).messages,  # type: ignore[union-attr]
        "events": [(e.kind, e.data.get("step")) for e in store.events(run_id)],
        "previews": store.previews([run_id]),
        "deltas": [e for e in published if e.kind is EventKind.TEXT_DELTA],
    }
    store.close()
    return kept


def text_shown(deltas: list[Event]) -> str:
    """What a viewer shows once it has dropped every void attempt."""
    shown: list[str] = []
    for event in deltas:
        if event.data.get("void"):
            shown = [s for s in shown if not s.startswith(f"{event.data['turn']}:")]
            continue
        for part in event.data["parts"]:
            shown.append(f"{event.data['turn']}:{part['text']}")
    return "".join(s.split(":", 1)[1] for s in shown)


def test_a_streamed_run_keeps_the_history_of_one_not_streamed(
    api: FakeMessagesAPI, tmp_path: Path
) -> None:
    quiet = run_writer(api, tmp_path / "quiet.sqlite3", stream=False, turns=Turns())
    loud = run_writer(api, tmp_path / "loud.sqlite3", stream=True, turns=Turns())
    assert quiet["deltas"] == []
    assert loud["deltas"], "the streamed run published text_delta events"
    assert text_shown(loud["deltas"]) == FIRST + '{"key": "alpha"}' + LAST
    assert {e.data["turn"] for e in loud["deltas"]} == {1, 2}
    for key in ("result", "messages", "events", "previews"):
        assert loud[key] == quiet[key], key
    assert EventKind.TEXT_DELTA not in {kind for kind, _ in loud["events"]}
    assert loud["previews"] == {}


def test_a_stream_broken_half_way_is_retried_whole_and_voided(
    api: FakeMessagesAPI, tmp_path: Path
) -> None:
    whole = run_writer(api, tmp_path / "whole.sqlite3", stream=True, turns=Turns())
    broken = run_writer(
        api, tmp_path / "broken.sqlite3", stream=True, turns=Turns(break_first=True)
    )
    voids = [e for e in broken["deltas"] if e.data.get("void")]
    assert len(voids) == 1 and voids[0].data["turn"] == 1
    before = broken["deltas"][: broken["deltas"].index(voids[0])]
    assert before and all(not e.data.get("void") for e in before)
    assert text_shown(broken["deltas"]) == text_shown(whole["deltas"])
    for key in ("result", "messages", "events", "previews"):
        assert broken[key] == whole[key], key
