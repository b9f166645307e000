"""How a run fails when user code (a model, a tool, a function agent) raises a
``BaseException`` that is not an ``Exception``: ``SystemExit``, ``KeyboardInterrupt``...

Why apart: such an exception passes every ``except Exception`` on its way up. Left to reach
the actor's loop it stopped that actor alone (a pooled actor) or every actor (pykka's own
threads), and the run's requester waited for its whole deadline to hear ``timed_out``. Here
it becomes what any failure is: the run fails at once, with an error kind of its own and an
error naming the exception and what raised it. It is caught on the agent's thread, never the
main thread (a real Ctrl-C is delivered there, to the caller of the runtime, not to a run).
"""

from __future__ import annotations

import traceback
from typing import Any, Protocol

from subagents.supervision.requests import as_a_terminal_shows

BASE_EXCEPTION = "base_exception"
"""The error kind of a run whose model, tool or function raised a ``BaseException`` that is
not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``...)."""


def shown(exc: BaseException) -> str:
    """``str(exc)``, or what Python's own tracebacks say when that raises (a user's
    exception class whose ``__str__`` reads an attribute it never set): a failure's message
    made in an ``except`` must not raise in turn, or the run is never failed and its
    requester hears ``timed_out`` only at the deadline. A lone surrogate in it (a message
    made from a bad decode) becomes U+FFFD, as a terminal shows it: the run's error holding
    it could not be stored, and its end was recorded with the store's error instead."""
    try:
        return as_a_terminal_shows(str(exc))
    except BaseException:
        return "<exception str() failed>"


def named(exc: BaseException) -> str:
    """``SystemExit: 3``, or ``KeyboardInterrupt`` when it says nothing more."""
    text = shown(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def raised(what: str, exc: BaseException) -> str:
    """The error of such a run: ``the function sweep raised SystemExit: 3``."""
    return f"{what} raised {named(exc)}"


class Failing(Protocol):
    """What fails a run whose handling raised (an agent actor, ``AgentPort``'s side)."""

    @property
    def log(self) -> Any: ...
    def fail(self, kind: str, message: str) -> None: ...


def handling_raised(run: Failing, agent: str, exc: BaseException) -> None:
    """A handling of ``agent``'s run raised ``exc`` (called in its ``except``: the traceback
    is logged): the run fails at once. A ``BaseException`` too: left to the actor's loop it
    would stop that actor without a word (or, on pykka's own threads, every actor), and the
    requester would hear ``timed_out`` only at the deadline."""
    if isinstance(exc, Exception):
        run.log.error("agent crashed", error=shown_repr(exc), traceback=traceback.format_exc())
        run.fail("crash", f"{type(exc).__name__}: {shown(exc)}")
    else:  # an agent thread: never the main one
        run.log.error("agent raised", error=shown_repr(exc), traceback=traceback.format_exc())
        run.fail(BASE_EXCEPTION, raised(f"a handling of {agent}", exc))


def shown_repr(exc: BaseException) -> str:
    """``repr(exc)``, or its type's name when that raises (as ``shown``): for a log line
    made in an ``except``, which must not raise in turn."""
    try:
        return repr(exc)
    except BaseException:
        return f"<{type(exc).__name__}: repr() failed>"


NO_EVENT_LOOP = (
    "a function agent runs without an asyncio event loop, so it may await only its ctx"
    " operations: ctx.sleep(seconds), not asyncio.sleep; ctx.gather and ctx.wait_any, not"
    " asyncio.gather and asyncio.wait"
)


class BadAwait(TypeError):
    """Thrown into an ``async`` function agent at an ``await`` of something that is not one
    of its context's operations (``asyncio.sleep(0)`` yields ``None``, an asyncio future
    yields itself): it may catch it; if it does not, its run fails saying so."""


def bad_await(exc: Exception) -> str | None:
    """Why a function agent's coroutine failed, when it was by awaiting something of asyncio
    (what docs/function-agents.md promises a clear error for), else None (a crash). An
    ``await asyncio.sleep(1)`` raises inside asyncio before yielding anything, asking for
    the running loop, hence the second case."""
    if isinstance(exc, BadAwait):
        return shown(exc)
    if isinstance(exc, RuntimeError) and "no running event loop" in (said := shown(exc)):
        return f"it awaited something of asyncio ({said}); {NO_EVENT_LOOP}"
    return None
