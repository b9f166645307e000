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
