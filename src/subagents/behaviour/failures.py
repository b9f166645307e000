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

BASE_EXCEPTION = "base_exception"
"""The error kind of a run whose model, tool or function raised a ``BaseException`` that is
not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``...)."""


def named(exc: BaseException) -> str:
    """``SystemExit: 3``, or ``KeyboardInterrupt`` when it says nothing more."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def raised(what: str, exc: BaseException) -> str:
    """The error of such a run: ``the function sweep raised SystemExit: 3``."""
    return f"{what} raised {named(exc)}"
