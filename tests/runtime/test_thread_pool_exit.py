"""A thread pool asked for a thread while the interpreter shuts down says so, not "the limit"."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from .conftest import WAIT

# An object kept in ``builtins`` is collected while the interpreter finalizes
# (``sys.is_finalizing()`` is true then), after the main module and ``atexit`` are done: its
# ``__del__`` is code still starting work while the program exits.
_SCRIPT = textwrap.dedent(
    """
    import builtins, sys
    from subagents.actors.threads import ThreadPool

    pool = ThreadPool(name="exit-pool")

    class Late:
        def __del__(self):
            print("finalizing:", sys.is_finalizing(), flush=True)
            try:
                pool.{call}
            except RuntimeError as refused:
                print(type(refused).__name__ + ":", refused, flush=True)
            else:
                print("started", flush=True)

    builtins._subagents_late = Late()
    """
)


@pytest.mark.parametrize("call", ["run(lambda: None)", "add_spare()"])
def test_a_thread_asked_for_at_interpreter_shutdown_is_refused_as_shutdown(call: str) -> None:
    """On 3.11 ``Thread.start`` at finalization never returns (the new thread may not run):
    the pool asked it anyway, and the exit hung; on 3.12+ its "can't create new thread at
    interpreter shutdown" read as ``NoThread``, the process's thread limit."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(call=call)],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 0, done.stderr
    assert "finalizing: True" in done.stdout
    assert "InterpreterExiting: exit-pool could not start a thread" in done.stdout, done.stdout
    assert "the interpreter is shutting down" in done.stdout
    assert "NoThread" not in done.stdout


# An actor started and mailed by a finalizer, on a dispatcher that never ran a thread.
_ACTOR_SCRIPT = textwrap.dedent(
    """
    import builtins, sys
    from subagents.actors.pooled import Dispatcher, PooledActor

    class Echo(PooledActor):
        def on_receive(self, message):
            return message

    dispatcher = Dispatcher(size=1)

    class Late:
        def __del__(self):
            print("finalizing:", sys.is_finalizing(), flush=True)
            ref = Echo.start(dispatcher=dispatcher)
            try:
                ref.actor_inbox.put("late")
            except RuntimeError as refused:
                print(type(refused).__name__ + ":", refused, flush=True)
            else:
                print("put", flush=True)
            print("turn held:", ref.actor_inbox._turn.locked(), flush=True)

    builtins._subagents_late = Late()
    """
)


def test_mail_put_at_interpreter_shutdown_is_refused_and_lets_the_turn_go() -> None:
    """A dispatcher's first thread asked for at finalization: its watch thread's
    ``Thread.start`` never returned on 3.11 (the exit hung); the putter now hears
    ``InterpreterExiting`` and the mailbox's turn is let go, as for ``NoThread``."""
    done = subprocess.run(
        [sys.executable, "-c", _ACTOR_SCRIPT], capture_output=True, text=True, timeout=WAIT
    )
    assert done.returncode == 0, done.stderr
    assert "finalizing: True" in done.stdout
    assert "InterpreterExiting: subagents-dispatch could not start a thread" in done.stdout, (
        done.stdout
    )
    assert "turn held: False" in done.stdout, done.stdout
