"""A thread pool, dispatcher or actor asked for a thread while the interpreter shuts down says so
(not "the limit"), and a run's agent refused so is given up as at the limit."""

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
    from subagents.actors.pooled import Dispatcher
    from subagents.actors.pooled_actor import PooledActor

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


# A run's agent started, and a live run stopped, by a finalizer: the starts find no thread
# (the dispatcher's first, the own pool's first) and the stop's mail no thread to run it.
_AGENT_SCRIPT = textwrap.dedent(
    """
    import builtins, sys, threading
    import pykka
    from subagents.actors.agent import AgentActor, AgentKit
    from subagents.actors.effector import Effector, _Live
    from subagents.actors.inbox import FastInboxActor
    from subagents.actors.lazy_event import LazyEvent
    from subagents.actors.pooled import Dispatcher
    from subagents.actors.pooled_actor import PooledActor
    from subagents.actors.pooled_agent import PooledAgentActor
    from subagents.actors.threads import ThreadPool
    from subagents.actors.timer import TimerService
    from subagents.definitions.spec import AgentSpec
    from subagents.messages import RunRecord
    from subagents.supervision.effects import StartRun

    class Told(FastInboxActor):
        use_daemon_thread = True
        def on_receive(self, message):
            print("told:", type(message).__name__, flush=True)

    class Echo(PooledActor):
        def on_receive(self, message):
            return message

    def never_made(port):
        raise AssertionError("an agent that never had a thread made its behaviour")

    def behaviour_for(spec):
        return never_made

    dispatcher = Dispatcher(size=1)
    own = ThreadPool(name="exit-own")
    timer = TimerService()
    supervisor = Told.start()
    start = StartRun(
        record=RunRecord(run_id="r1", agent="late", task="t", root_run_id="r1"),
        spec=AgentSpec(name="late", description="d"),
        deadline=0.0,
    )

    def tried(what, call):
        try:
            call()
        except RuntimeError as refused:
            print(what, type(refused).__name__ + ":", refused, flush=True)
        else:
            print(what, "done", flush=True)

    def pooled():
        kit = AgentKit(supervisor=supervisor, timer=timer, behaviour_for=behaviour_for)
        tried("start:", lambda: PooledAgentActor.start(
            start, threading.Event(), kit, dispatcher=dispatcher))
        print("live on the dispatcher:", dispatcher.live, flush=True)

    def own_thread():
        kit = AgentKit(
            supervisor=supervisor, timer=timer, behaviour_for=behaviour_for, pool=own)
        tried("start:", lambda: AgentActor.start(start, threading.Event(), kit))
        left = [r for r in pykka.ActorRegistry.get_all() if r.actor_class is AgentActor]
        print("registered:", len(left), flush=True)

    def stop():
        ref = Echo.start(dispatcher=dispatcher)  # (its start hands its turn back)
        tried("stop:", lambda: Effector._stop(_Live(ref=ref, cancel=LazyEvent())))

    class Late:
        def __del__(self):
            print("finalizing:", sys.is_finalizing(), flush=True)
            {which}()

    builtins._subagents_late = Late()
    """
)


def _finalized(which: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _AGENT_SCRIPT.format(which=which)],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert done.returncode == 0, done.stderr
    assert "finalizing: True" in done.stdout, done.stdout
    return done.stdout


def test_a_run_started_on_a_dispatcher_at_interpreter_shutdown_is_given_up() -> None:
    """``PooledAgentActor``'s start caught only ``NoThread``: refused ``InterpreterExiting``,
    the actor stayed counted live on its dispatcher with its mailbox's turn held."""
    out = _finalized("pooled")
    assert "start: InterpreterExiting: subagents-dispatch could not start a thread" in out, out
    assert "live on the dispatcher: 0" in out, out


def test_a_run_started_on_its_own_thread_at_interpreter_shutdown_is_unregistered() -> None:
    """``FastInboxActor._loop_on`` caught only ``NoThread``: refused ``InterpreterExiting``,
    the actor never ran yet stayed in pykka's registry (``stop_all`` would ask it)."""
    out = _finalized("own_thread")
    assert "start: InterpreterExiting: exit-own could not start a thread" in out, out
    assert "registered: 0" in out, out


def test_a_run_stopped_at_interpreter_shutdown_is_stopped_quietly() -> None:
    """``Effector._stop`` caught only ``NoThread``: the stop's ``InterpreterExiting`` broke
    out of ``stop_all``'s loop, leaving the other runs unstopped."""
    out = _finalized("stop")
    assert "stop: done" in out, out
