"""Claude as the model: the official anthropic SDK behind the ``Model`` protocol.

Why this shape: the SDK's own retries are off (``max_retries=0``) and ``retry.call_with_retries``
retries instead, because only it knows the run's deadline and cancel signal. Bodies are decoded
by ``anthropic_wire`` (raw response, msgspec) so a malformed body is one clear error. Every stop
reason is handled here on purpose: ``end_turn``, ``tool_use``, ``stop_sequence`` and
``max_tokens`` are returned (the runtime decides what a cut-off turn means); ``pause_turn`` is
continued by sending the paused content back, a bounded number of times; ``refusal`` and
``model_context_window_exceeded`` become ``ModelError`` so the run fails with a clear kind.

Every call streams (``messages.stream``): ``stream`` hands the text and tool-input deltas to
the run's sink as they come, ``complete`` is the same call with nobody listening. A stream
that breaks half way (an ``error`` event, a dropped connection, no ``message_stop``) fails
the attempt, and the retry asks for the whole turn again; the sink is told the failed
attempt's pieces are void (``StreamSink.void``) before the next one begins.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from typing import Any

import anthropic
import httpx2

from subagents.blocking import about_to_block
from subagents.logs import get_logger
from subagents.messages import ContentBlock, ModelRequest, ModelResponse, TextBlock, Usage
from subagents.models.anthropic_stream import read_stream
from subagents.models.anthropic_wire import (
    ParsedResponse,
    WireUsage,
    messages_param,
    system_param,
    tools_param,
)
from subagents.models.base import CancelSignal, ModelError, StreamSink
from subagents.models.names import (
    DEFAULT_MODEL_ALIAS,
    Price,
    estimate_cost,
    model_id,
    price_for,
    resolve_model,
)
from subagents.models.retry import RetryPolicy, TransientError, call_with_retries

log = get_logger(__name__)

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
MODEL_ENV = "SUBAGENTS_MODEL"

NO_DEADLINE_TIMEOUT_S = 600.0
"""Per-attempt timeout for a call without a deadline."""

RETURNED_STOP_REASONS = frozenset({"end_turn", "tool_use", "stop_sequence", "max_tokens"})

_CONTEXT_WINDOW_HINTS = ("prompt is too long", "context window", "context_window")

_STREAM_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}
"""The status of each API error type, for an error that comes as a stream's ``error`` event
(docs.anthropic.com, "Errors"); an unknown type is a server error (retried)."""


class AnthropicModel:
    """A ``Model`` that calls the Messages API. Thread-safe: one client serves every agent."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        default_model: str | None = None,
        retry: RetryPolicy | None = None,
        max_pause_continuations: int = 5,
        aliases: Mapping[str, str] | None = None,
        prices: Mapping[str, Price] | None = None,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
        if not key:
            raise ModelError("auth", f"no API key: set {API_KEY_ENV} (or pass api_key=)")
        self._aliases = aliases
        self._prices = prices
        self.default_model = model_id(
            default_model or os.environ.get(MODEL_ENV) or DEFAULT_MODEL_ALIAS, aliases=aliases
        )
        self.retry = retry or RetryPolicy()
        self.max_pause_continuations = max_pause_continuations
        self.base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        self._client = anthropic.Anthropic(api_key=key, base_url=self.base_url, max_retries=0)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    # A copy sent to another process (a Ray cluster's node hosts, docs/cluster.md) opens a
    # client (a connection pool) of its own, with the same key and address.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        client = state.pop("_client")
        state["_api_key"] = client.api_key
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        key = state.pop("_api_key")
        self.__dict__.update(state)
        self._client = anthropic.Anthropic(api_key=key, base_url=self.base_url, max_retries=0)

    def __enter__(self) -> AnthropicModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- the Model protocol -----------------------------------------------------------------

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        """One model turn (continuing through ``pause_turn``), retried within the deadline."""
        return self._turn(request, None, deadline, cancel)

    def stream(
        self,
        request: ModelRequest,
        sink: StreamSink,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        """``complete``, handing ``sink`` the text and tool-input deltas as they come (the
        pieces of every ``pause_turn`` continuation, one after the other)."""
        return self._turn(request, sink, deadline, cancel)

    def _turn(
        self,
        request: ModelRequest,
        sink: StreamSink | None,
        deadline: float | None,
        cancel: CancelSignal | None,
    ) -> ModelResponse:
        # An empty or ``inherit`` model here means the runtime left it open: use our default.
        model = resolve_model(request.model, default=self.default_model, aliases=self._aliases)
        bound = log.bind(run_id=request.run_id, agent=request.agent, model=model)
        params = _request_params(request, model)
        blocks: list[ContentBlock] = []
        paused_content: list[dict[str, Any]] = []
        usage = Usage()
        continuations = 0
        while True:
            call_params = params
            if paused_content:
                call_params = {
                    **params,
                    "messages": [
                        *params["messages"],
                        {"role": "assistant", "content": list(paused_content)},
                    ],
                }
            parsed = call_with_retries(
                functools.partial(self._attempt, call_params, sink, cancel),
                policy=self.retry,
                deadline=deadline,
                cancel=cancel,
                what=f"call to {model}",
                logger=bound,
                on_retry=sink.void if sink is not None else None,
            )
            blocks.extend(parsed.blocks)
            # Price the model asked for; the API may answer with a dated id of it.
            priced = model if price_for(model, prices=self._prices) else parsed.model or model
            usage = usage + self._usage(priced, parsed.usage)
            bound.debug(
                "model.call",
                stop_reason=parsed.stop_reason,
                input_tokens=parsed.usage.input_tokens,
                output_tokens=parsed.usage.output_tokens,
            )
            stop = parsed.stop_reason
            if stop == "pause_turn" and continuations < self.max_pause_continuations:
                continuations += 1
                paused_content.extend(parsed.raw_content)
                continue
            _check_stop_reason(stop, model, blocks)
            if stop == "pause_turn":
                bound.warning("model.pause_limit", continuations=continuations)
            return ModelResponse(
                content=tuple(blocks),
                stop_reason=stop,
                usage=usage,
                model=parsed.model or model,
            )

    # -- one HTTP attempt -------------------------------------------------------------------

    def _attempt(
        self,
        params: dict[str, Any],
        sink: StreamSink | None,
        cancel: CancelSignal | None,
        timeout: float | None,
    ) -> ParsedResponse:
        """One streamed request read to its end; errors mapped to ``TransientError`` (retry)
        or ``ModelError`` (fail), those met half way through the stream as those before it.
        ``timeout`` (the time left to the deadline) bounds the whole attempt, from its start,
        not only each read (``read_stream``). Without a deadline only each read is bounded:
        a long turn is what streaming is for, and one cut would be asked for (and paid for)
        again and cut again."""
        seconds = timeout if timeout is not None else NO_DEADLINE_TIMEOUT_S
        started = time.monotonic()
        about_to_block()
        try:
            with self._client.messages.stream(**params, timeout=seconds) as stream:
                return read_stream(stream, sink, cancel=cancel, within=timeout, since=started)
        except anthropic.APIStatusError as exc:
            raise _status_error(exc, params["model"]) from exc
        except (anthropic.APITimeoutError, httpx2.TimeoutException) as exc:
            raise TransientError("timeout", f"no response within {seconds:.2f} s") from exc
        except anthropic.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise TransientError("connection", f"connection failed: {cause}") from exc
        except httpx2.TransportError as exc:  # while reading the stream: the SDK lets it by
            raise TransientError("connection", f"the response stream broke: {exc}") from exc
        except ValueError as exc:  # the SDK could not read a tool call's streamed input
            raise ModelError("malformed_response", f"unreadable stream: {exc}") from exc

    def _usage(self, model: str, wire: WireUsage) -> Usage:
        usage = Usage(
            input_tokens=wire.input_tokens,
            output_tokens=wire.output_tokens,
            cache_creation_input_tokens=wire.cache_creation_input_tokens or 0,
            cache_read_input_tokens=wire.cache_read_input_tokens or 0,
            model_calls=1,
        )
        cost = estimate_cost(model, usage, prices=self._prices)
        return Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_creation_input_tokens=usage.cache_creation_input_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens,
            cost_usd=cost,
            model_calls=1,
        )


def _status_error(exc: anthropic.APIStatusError, model: str) -> ModelError:
    """An HTTP error status as a retryable ``TransientError`` or a final ``ModelError``; an
    ``error`` event in a stream (its status 200, the error in its body) as the status the
    same error has as a response (``_STREAM_ERROR_STATUS``)."""
    status = exc.status_code
    detail = exc.api_message or _body_text(exc)
    request_id = f" (request-id {exc.request_id})" if exc.request_id else ""
    text = f"HTTP {status}: {detail}{request_id}"
    if status < 400:
        text = f"{exc.type or 'error'} event in the response stream: {detail}{request_id}"
        status = _STREAM_ERROR_STATUS.get(exc.type or "", 500)
    should_retry = exc.response.headers.get("x-should-retry")
    if should_retry == "false" and (status == 429 or status >= 500):
        # The server says trying again will not help (e.g. a hard limit): fail now.
        kind = {429: "rate_limited", 529: "overloaded"}.get(status, "server")
        return ModelError(kind, f"{text} (the server says not to retry)")
    if should_retry == "true" and status < 500 and status != 429:
        return TransientError("server", text, retry_after=_retry_after(exc))
    if status == 429:
        return TransientError("rate_limited", text, retry_after=_retry_after(exc))
    if status == 529:
        return TransientError("overloaded", text, retry_after=_retry_after(exc))
    if status >= 500 or status in (408, 409):
        return TransientError("server", text, retry_after=_retry_after(exc))
    if status == 401:
        return ModelError("auth", f"{text}; check {API_KEY_ENV}")
    if status == 403:
        return ModelError("permission", f"{text}; the key in {API_KEY_ENV} may not use {model}")
    if status == 404:
        return ModelError("not_found", f"{text}; is {model!r} a valid model id?")
    if status == 400 and any(h in detail.lower() for h in _CONTEXT_WINDOW_HINTS):
        return ModelError("context_window", text)
    return ModelError("bad_request", text)


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` first, then ``retry-after``."""
    headers = exc.response.headers
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue  # an HTTP date: rare for this API; fall back to our own backoff
        if seconds >= 0:
            return seconds
    return None


def _body_text(exc: anthropic.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, str | bytes):
        text = body.decode("utf-8", errors="replace") if isinstance(body, bytes) else body
        return text[:200] or exc.message
    return exc.message


def _request_params(request: ModelRequest, model: str) -> dict[str, Any]:
    """The Messages API parameters of a request: the system prompt and tools only when set."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": messages_param(request.messages),
    }
    system = system_param(request.system)
    if system is not None:
        params["system"] = system
    tools = tools_param(request)
    if tools is not None:
        params["tools"] = tools
    return params


def _check_stop_reason(stop: str, model: str, blocks: list[ContentBlock]) -> None:
    """Raise the ``ModelError`` a turn's last stop reason means, if it is not an answer: a
    refusal (with what the model said), a full context window, or a reason we do not know
    (``pause_turn`` past the continuation limit is returned, with what came so far)."""
    if stop == "refusal":
        detail = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()
        raise ModelError(
            "refusal", f"{model} declined to answer" + (f": {detail}" if detail else "")
        )
    if stop == "model_context_window_exceeded":
        raise ModelError(
            "context_window",
            f"the conversation no longer fits {model}'s context window",
        )
    if stop != "pause_turn" and stop not in RETURNED_STOP_REASONS:
        raise ModelError("malformed_response", f"unknown stop_reason {stop!r}")
