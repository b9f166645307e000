"""The offline scripted model: deterministic turns per agent, so the runtime works without network.

Why: the runtime, its tests, the demo and anyone without an API key need a model that answers
instantly, the same way every time, and that can still exercise every path a real model does:
tool calls (several per turn), latency, cancellation, deadlines, transient failures, usage.

How a turn is picked: the script of ``request.agent``, at index = number of assistant messages
already in the conversation. A resumed run therefore continues where it stopped, and a
restarted one replays from its checkpoint. Past the end of a script (or with no script) the
model answers ``default_reply``, so every agent finishes. The format is documented in
``docs/offline-model.md``.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from subagents.blocking import about_to_block
from subagents.definitions.spec import AgentSpec
from subagents.logs import debug_enabled, get_logger
from subagents.messages import (
    ChatMessage,
    ContentBlock,
    ModelRequest,
    ModelResponse,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from subagents.models.base import CancelSignal, ModelError, StreamSink
from subagents.models.script import (
    Script,
    ScriptedUsage,
    ScriptError,
    Turn,
    load_scripts_file,
    parse_scripts,
    scripts_from_metadata,
)
from subagents.models.templating import LazyValues, render, render_value, template_values

DEFAULT_REPLY = "{agent} finished: {task}"
"""What an agent says when its script is exhausted or it has none."""

SCRIPTED_MODEL_ID = "scripted"

_RECENT_REQUESTS = 10_000
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")

log = get_logger(__name__)

ScriptInput = Mapping[str, Sequence[Turn | Mapping[str, Any] | str]]


class ScriptedModel:
    """A ``Model`` that plays per-agent scripts. Thread-safe: many agents may call it at once."""

    answers_as = SCRIPTED_MODEL_ID
    """What the runs it answers record as having answered them (``RunRecord.answered_by``),
    whatever model they ask for: it stands in for every model name (a ``Model`` answering
    as the name asked for has no such attribute)."""

    def __init__(
        self,
        scripts: ScriptInput | None = None,
        *,
        default_reply: str = DEFAULT_REPLY,
        source: str = "scripts",
        fresh_ids: bool = False,
    ) -> None:
        self._scripts: dict[str, Script] = parse_scripts(scripts or {}, source=source)
        self._default_reply = default_reply
        self.fresh_ids = fresh_ids
        """Whether each call gives its tool calls ids of their own (``tool_use_id``'s
        ``take``), as a real model does when a turn is taken again: with the same ids, a
        lost turn taken again after a crash matched its first take's journal by id and hid
        what it did twice. Off by default: a script's ids stay ``toolu_<agent>_<turn>_<i>``."""
        self._lock = threading.Lock()
        self._calls_per_turn: dict[tuple[str, str, int], int] = {}
        self._requests: deque[ModelRequest] = deque(maxlen=_RECENT_REQUESTS)
        self._broken: dict[str, ScriptError] = {}
        self._streaming = threading.local()
        """``sink``: the ``StreamSink`` of the ``stream`` call under way on this thread."""

    # A copy sent to another process (a Ray cluster's node hosts, docs/cluster.md) plays the
    # same scripts from where this one is, with a lock of its own.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"], state["_streaming"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._streaming = threading.local()

    # -- constructors -----------------------------------------------------------------------

    @classmethod
    def from_specs(
        cls,
        specs: Iterable[AgentSpec],
        *,
        default_reply: str = DEFAULT_REPLY,
        strict: bool = False,
        fresh_ids: bool = False,
    ) -> ScriptedModel:
        """Scripts written in definitions' frontmatter under ``script:``.

        A bad script does not stop the others: it is logged once (a warning naming the file,
        agent, turn and field) and every call for that agent fails with that error
        (``ModelError("script", ...)``), so its runs fail saying why. ``strict=True`` raises
        ``ScriptError`` instead.
        """
        model = cls(default_reply=default_reply, fresh_ids=fresh_ids)
        model._scripts, model._broken = scripts_from_metadata(specs, strict=strict)
        for agent, error in model._broken.items():
            log.warning("scripted_model.bad_script", agent=agent, error=str(error))
        return model

    @classmethod
    def from_file(
        cls, path: str | Path, *, default_reply: str = DEFAULT_REPLY, fresh_ids: bool = False
    ) -> ScriptedModel:
        """Scripts from a YAML or JSON file: ``{agent name: [turns]}``."""
        model = cls(default_reply=default_reply, fresh_ids=fresh_ids)
        model._scripts = load_scripts_file(path)
        return model

    # -- inspection -------------------------------------------------------------------------

    @property
    def agents(self) -> frozenset[str]:
        """The agents this model has a script for."""
        return frozenset(self._scripts)

    def script(self, agent: str) -> Script:
        """The turns scripted for ``agent`` (empty when it has none)."""
        return self._scripts.get(agent, ())

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """The most recent requests received (bounded), oldest first: what the model was shown."""
        with self._lock:
            return tuple(self._requests)

    # -- the Model protocol -----------------------------------------------------------------

    def complete(
        self,
        request: ModelRequest,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        """Play the turn for this point of the conversation. Raise ``ModelError`` on failure."""
        return self._play(request, getattr(self._streaming, "sink", None), deadline, cancel)

    def stream(
        self,
        request: ModelRequest,
        sink: StreamSink,
        *,
        deadline: float | None = None,
        cancel: CancelSignal | None = None,
    ) -> ModelResponse:
        """``complete``, telling ``sink`` a turn's ``stream`` pieces over its ``delay`` (a
        turn without ``stream`` tells nothing: it comes whole, as from a backend that does
        not stream). Through ``complete``, with ``sink`` set for this thread, so that a
        subclass that wraps ``complete`` (to record what it is shown) sees streamed calls too;
        played at once by a ``ScriptedModel`` itself (no thread-local set and cleared)."""
        if type(self) is ScriptedModel:
            return self._play(request, sink, deadline, cancel)
        self._streaming.sink = sink
        try:
            return self.complete(request, deadline=deadline, cancel=cancel)
        finally:
            self._streaming.sink = None

    def _play(
        self,
        request: ModelRequest,
        sink: StreamSink | None,
        deadline: float | None,
        cancel: CancelSignal | None,
    ) -> ModelResponse:
        turn_index = _assistant_turns(request.messages)
        script = self._scripts.get(request.agent, ())
        turn = script[turn_index] if turn_index < len(script) else None
        call_number = self._record(request, turn, turn_index)

        _check_signals(deadline, cancel)
        broken = self._broken.get(request.agent)
        if broken is not None:
            raise ModelError("script", str(broken))
        values = LazyValues(
            lambda: template_values(
                request.messages, agent=request.agent, run_id=request.run_id, turn=turn_index
            )
        )
        content = self._content(turn, values, agent=request.agent, turn_index=turn_index)
        if sink is not None and turn is not None and turn.stream is not None:
            pieces = _pieces(content, turn.stream)
            if _fails(turn, call_number):  # a stream that breaks half way
                pieces = pieces[: len(pieces) // 2]
            _tell_pieces(pieces, sink, turn.delay, deadline, cancel)
        elif turn is not None and turn.delay > 0:
            _simulate_latency(turn.delay, deadline, cancel)
        if turn is not None:
            _fail_as_scripted(request, turn, turn_index, call_number)
        if turn is None:
            stop_reason = "end_turn"
        elif turn.stop_reason is not None:
            stop_reason = turn.stop_reason
        else:  # (``_content``: a block per scripted tool call)
            stop_reason = "tool_use" if turn.tool_calls else "end_turn"
        usage = _usage(request, content, turn.usage if turn is not None else None)
        if debug_enabled():  # a filtered-out debug call still costs (logs.py)
            log.debug(
                "scripted_model.turn",
                agent=request.agent,
                run_id=request.run_id,
                turn=turn_index,
                scripted=turn is not None,
                stop_reason=stop_reason,
            )
        return ModelResponse(
            content=content,
            stop_reason=stop_reason,
            usage=usage,
            model=request.model or SCRIPTED_MODEL_ID,
        )

    def _record(self, request: ModelRequest, turn: Turn | None, turn_index: int) -> int:
        """Keep the request; the how-manieth call of this run's turn this is (counted only for
        a turn that fails a number of times, the one place it matters; else 1)."""
        call_number = 1
        with self._lock:
            self._requests.append(request)
            if turn is not None and turn.fail_times is not None:
                key = (request.agent, request.run_id, turn_index)
                call_number = self._calls_per_turn.get(key, 0) + 1
                self._calls_per_turn[key] = call_number
        return call_number

    def _content(
        self, turn: Turn | None, values: Mapping[str, str], *, agent: str, turn_index: int
    ) -> tuple[ContentBlock, ...]:
        if turn is None or (turn.text is None and not turn.tool_calls):
            return (TextBlock(text=render(self._default_reply, values)),)
        blocks: list[ContentBlock] = []
        if turn.text is not None:
            blocks.append(TextBlock(text=render(turn.text, values)))
        take = secrets.token_hex(4) if self.fresh_ids and turn.tool_calls else None
        for index, call in enumerate(turn.tool_calls):
            blocks.append(
                ToolUseBlock(
                    id=tool_use_id(agent, turn_index, index, take),
                    name=call.name,
                    input=render_value(call.input, values),
                )
            )
        return tuple(blocks)


def tool_use_id(agent: str, turn: int, index: int, take: str | None = None) -> str:
    """``toolu_<agent>_<turn>_<i>`` (``_<take>`` after it: a call's own, ``fresh_ids``),
    with characters the Messages API refuses replaced by ``_``."""
    used = (
        f"toolu_{agent}_{turn}_{index}" if take is None else f"toolu_{agent}_{turn}_{index}_{take}"
    )
    return _UNSAFE_ID_CHARS.sub("_", used)


def _check_signals(deadline: float | None, cancel: CancelSignal | None) -> None:
    if cancel is not None and cancel.is_set():
        raise ModelError("cancelled", "the run was stopped before the model call")
    if deadline is not None and time.monotonic() >= deadline:
        raise ModelError(
            "timeout", "the run's deadline passed before the model call", transient=True
        )


def _simulate_latency(delay: float, deadline: float | None, cancel: CancelSignal | None) -> None:
    """Wait ``delay`` seconds, returning early (with an error) on cancel or at the deadline."""
    about_to_block()  # a real model call waits on the network here
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    wait_for = delay if remaining is None else min(delay, remaining)
    signal: CancelSignal = cancel if cancel is not None else threading.Event()
    if signal.wait(wait_for):
        raise ModelError("cancelled", f"the run was stopped during a {delay:g} s model call")
    if remaining is not None and remaining < delay:
        raise ModelError(
            "timeout",
            f"the run's deadline came {remaining:.3f} s into a {delay:g} s model call",
            transient=True,
        )


def _assistant_turns(messages: Sequence[ChatMessage]) -> int:
    """How many of ``messages`` the model wrote: the index of the turn to play. A loop, not
    ``sum`` of a generator (a frame resumed per message, on every scripted call)."""
    turns = 0
    for message in messages:
        if message.role == "assistant":
            turns += 1
    return turns


def _chars(blocks: Iterable[ContentBlock]) -> int:
    """The characters of ``blocks`` the usage is estimated from: a text's, a tool result's,
    a tool call's name and JSON input. One loop over them, no generator or call per block:
    it runs over the whole conversation on every scripted call (a fan-out's every child)."""
    chars = 0
    for block in blocks:
        kind = type(block)
        if kind is TextBlock:
            chars += len(block.text)  # type: ignore[union-attr]
        elif kind is ToolResultBlock:
            chars += len(block.content)  # type: ignore[union-attr]
        else:
            chars += _block_chars(block)
    return chars


def _block_chars(block: ContentBlock) -> int:
    if isinstance(block, TextBlock):
        return len(block.text)
    if isinstance(block, ToolResultBlock):
        return len(block.content)
    return len(block.name) + len(msgspec.json.encode(block.input))


def _usage(
    request: ModelRequest, content: tuple[ContentBlock, ...], scripted: ScriptedUsage | None
) -> Usage:
    """Scripted counters where given; otherwise about four characters per token, at least 1."""
    input_chars = len(request.system)
    for message in request.messages:
        input_chars += _chars(message.content)
    output_chars = _chars(content)
    input_tokens = max(1, input_chars // 4)
    output_tokens = max(1, output_chars // 4)
    if scripted is None:
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens, model_calls=1)
    return Usage(
        input_tokens=input_tokens if scripted.input_tokens is None else scripted.input_tokens,
        output_tokens=output_tokens if scripted.output_tokens is None else scripted.output_tokens,
        cache_creation_input_tokens=scripted.cache_creation_input_tokens,
        cache_read_input_tokens=scripted.cache_read_input_tokens,
        cost_usd=scripted.cost_usd,
        model_calls=1,
    )


def _pieces(content: tuple[ContentBlock, ...], each: int) -> list[tuple[str | None, str]]:
    """The turn as a stream tells it: each text, and each tool call's input as JSON, in
    ``each`` pieces; ``(tool name or None for text, piece)``."""
    pieces: list[tuple[str | None, str]] = []
    for block in content:
        if isinstance(block, TextBlock):
            tool, whole = None, block.text
        elif isinstance(block, ToolUseBlock):
            tool, whole = block.name, msgspec.json.encode(block.input).decode()
        else:
            continue
        size = max(1, -(-len(whole) // each))
        pieces.extend((tool, whole[at : at + size]) for at in range(0, len(whole), size))
    return pieces


def _tell_pieces(
    pieces: list[tuple[str | None, str]],
    sink: StreamSink,
    delay: float,
    deadline: float | None,
    cancel: CancelSignal | None,
) -> None:
    """Tell ``sink`` each piece, the first at once and the next ``delay / len(pieces)`` later
    (so the turn still takes ``delay``), cut short by a stop or the deadline."""
    for tool, piece in pieces:
        if tool is None:
            sink.text(piece)
        else:
            sink.tool_input(tool, piece)
        if delay > 0:
            _simulate_latency(delay / len(pieces), deadline, cancel)


def _fails(turn: Turn, call_number: int) -> bool:
    """Whether this call of ``turn`` raises its scripted error."""
    if turn.error is None:
        return False
    return turn.fail_times is None or call_number <= turn.fail_times


def _fail_as_scripted(request: ModelRequest, turn: Turn, turn_index: int, call_number: int) -> None:
    """Raise the turn's scripted error, on every call or on the first ``fail_times`` ones."""
    if turn.error is None or not _fails(turn, call_number):
        return
    log.debug(
        "scripted_model.error",
        agent=request.agent,
        run_id=request.run_id,
        turn=turn_index,
        kind=turn.error.kind,
        call=call_number,
    )
    raise ModelError(turn.error.kind, turn.error.message, transient=turn.error.transient)
