"""The Model protocol: one request in, one response out, within a deadline.

Backends (the anthropic SDK, the offline scripted model) implement it. The runtime never knows
which backend it talks to. A call is given the run's deadline (``time.monotonic()`` seconds)
and a cancel signal so that a stopped run's call returns soon: pykka cannot interrupt a
thread, so the backend must cooperate.

A backend that can say what the model writes while it writes it is a ``StreamingModel``: its
``stream`` is ``complete`` with a ``StreamSink`` told each piece of text and of a tool call's
input as it comes. The response it returns is the same as ``complete``'s, piece for piece:
what a run records and replays never depends on whether it streamed (docs/anthropic.md).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from subagents.messages import ModelRequest, ModelResponse


class CancelSignal(Protocol):
    """What a backend may ask of a cancel signal (``threading.Event`` is one)."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class ModelError(Exception):
    """A model call that failed for good (after the backend's own retries).

    ``kind`` names the failure for the run's outcome: ``auth``, ``bad_request``,
    ``rate_limited``, ``overloaded``, ``server``, ``connection``, ``timeout``,
    ``malformed_response``, ``refusal``, ``context_window``, ``cancelled``, ``script``.
    ``transient`` tells the supervisor's restart policy whether trying again later could help.
    """

    def __init__(self, kind: str, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.transient = transient

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


class StreamSink(Protocol):
    """Where a streaming backend hands what the model says, as it says it (on the calling
    thread: the run's). Pieces of one call come in order; ``void`` says that the attempt that
    streamed what came since the last ``void`` failed and will be tried again (a stream that
    broke half way is retried whole), so a viewer must drop what it showed of it."""

    def text(self, text: str) -> None: ...

    def tool_input(self, tool: str, partial_json: str) -> None: ...

    def void(self) -> None: ...


@runtime_checkable
class Model(Protocol):
    """A language model backend."""

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        """Take one turn. Raise ``ModelError`` on failure; return by ``deadline``."""
        ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can stream: ``complete``, telling ``sink`` the pieces as they come."""

    def stream(
        self,
        request: ModelRequest,
        sink: StreamSink,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        """Take one turn as ``complete`` does; the same response, streamed to ``sink``."""
        ...
