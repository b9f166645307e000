"""A dispatcher that meets the process's thread limit before it ever had a thread: a real
limit (``RLIMIT_NPROC``, in a process of its own, whose real uid is one nobody else uses so
that only its own threads count; root is exempt from the limit, so the process runs
without ``CAP_SYS_RESOURCE`` and ``CAP_SYS_ADMIN``: ``setpriv``).

Before: the first actor's start found no thread, left the actor in the dispatcher's line for
a start nobody made, its mailbox's turn held: every ask of it waited for ever, even once
threads were to be had again (the next put found the turn held and handed nothing on).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from typing import Any

import pytest

WAIT = 60.0

_AT_THE_LIMIT = textwrap.dedent(
    """
    import json, os, resource, sys
    from typing import Any
    import pykka
    from subagents.actors.pooled import Dispatcher
    from subagents.actors.pooled_actor import PooledActor

    wait = float(sys.argv[1])
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    handled = []
    class Echo(PooledActor):
        def on_receive(self, message: Any) -> Any:
            handled.append(message)
            return message

    def tasks() -> int:
        return len(os.listdir("/proc/self/task"))

    def outcome(ask) -> str:
        try:
            return "answered " + ask()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
    """
)
"""What the scripts below start with: an ``Echo`` actor noting what it handled, the
process's threads (``tasks``: the limit is set to it), an ask's ``outcome`` as text."""

_SCRIPT = _AT_THE_LIMIT + textwrap.dedent(
    """
    d = Dispatcher(size=2, stall_s=0.05, name="t-limit")
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks(), hard))  # no thread more
    ref = Echo.start(dispatcher=d)  # (does not raise: its first message tries again)
    at_limit = outcome(lambda: ref.ask("at the limit", timeout=wait))
    resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))  # threads to be had again
    freed = outcome(lambda: ref.ask("threads freed", timeout=wait))
    ref.stop(timeout=wait)
    print(json.dumps({"at_limit": at_limit, "freed": freed, "handled": handled,
                      "left": [t.name for t in d.close(wait)]}))
    """
)


def _unprivileged() -> list[str]:
    """The command prefix that runs a process under a real uid of its own, without the
    capabilities that exempt root from ``RLIMIT_NPROC``."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a process under a thread limit of its own")
    uid = 400_000 + os.getpid() % 100_000
    return ["setpriv", f"--ruid={uid}", "--bounding-set=-sys_resource,-sys_admin"]


def _seen_at_the_limit(script: str, timeout: float) -> dict[str, Any]:
    """``script`` run (``WAIT`` its argument) in a process that may meet its own thread
    limit (``_unprivileged``); what it printed last, read as JSON. It must exit 0."""
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", script, str(WAIT)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def test_an_ask_at_the_thread_limit_is_refused_naming_it_and_served_once_threads_free() -> None:
    """At the limit the asker hears ``NoThread`` naming it at once (its message taken back:
    not handled later behind its back); once threads free, the next ask starts the
    dispatcher and is answered, ``on_start`` first."""
    seen = _seen_at_the_limit(_SCRIPT, timeout=WAIT * 4)
    assert seen["at_limit"].startswith("NoThread: t-limit could not start a thread"), seen
    assert "thread limit" in seen["at_limit"]
    assert seen["freed"] == "answered threads freed", seen
    assert seen["handled"] == ["threads freed"], seen
    assert seen["left"] == [], seen


_PUT_MEANWHILE = _AT_THE_LIMIT + textwrap.dedent(
    """
    import threading

    d = Dispatcher(size=2, stall_s=0.05, name="t-limit")
    ref: Any = None
    go, put, done = threading.Event(), threading.Event(), threading.Event()
    theirs = {}

    def other_caller() -> None:  # another thread (started before the limit) puts meanwhile
        assert go.wait(wait)
        ref.tell("told meanwhile")
        theirs["ask"] = ref.ask("asked meanwhile", block=False)
        put.set()
        done.wait(wait)  # (its thread kept until the limit is lifted: no slot freed)

    helper = threading.Thread(target=other_caller)
    helper.start()

    def holding_the_turn(frame, event, arg) -> None:  # the refused put holds the turn here
        if event == "call" and frame.f_code.co_name == "_start" and not go.is_set():
            go.set()
            assert put.wait(wait)

    resource.setrlimit(resource.RLIMIT_NPROC, (tasks(), hard))  # no thread more
    ref = Echo.start(dispatcher=d)
    sys.setprofile(holding_the_turn)
    mine = outcome(lambda: ref.ask("mine", timeout=wait))
    sys.setprofile(None)
    assert put.wait(wait)
    theirs_heard = outcome(lambda: theirs["ask"].get(timeout=wait))
    done.set()
    helper.join(wait)
    resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))  # threads to be had again
    freed = outcome(lambda: ref.ask("threads freed", timeout=wait))
    ref.stop(timeout=wait)
    print(json.dumps({"mine": mine, "theirs": theirs_heard, "freed": freed,
                      "handled": handled, "left": [t.name for t in d.close(wait)]}))
    """
)


def test_what_another_thread_put_while_a_refused_put_held_the_turn_is_not_left_unanswered() -> None:
    """Another caller's ask put while the refused put held the turn (its own put found the
    turn held, so it handed nothing on) is refused ``NoThread`` too, at once; it waited
    for ever (until some later put) when the turn was let go with it still in the mailbox.
    A tell put meanwhile is kept, in its place, and handled once, when threads free."""
    seen = _seen_at_the_limit(_PUT_MEANWHILE, timeout=WAIT * 6)
    assert seen["mine"].startswith("NoThread: t-limit could not start a thread"), seen
    assert seen["theirs"].startswith("NoThread: t-limit could not start a thread"), seen
    assert seen["freed"] == "answered threads freed", seen
    assert seen["handled"] == ["told meanwhile", "threads freed"], seen
    assert seen["left"] == [], seen


_STOP_ALL = textwrap.dedent(
    """
    import json, os, resource, sys
    from typing import Any
    import pykka
    from subagents.actors.effector import Effector
    from subagents.actors.mail_desk import MailDesk
    from subagents.actors.pooled import Dispatcher
    from subagents.actors.timer import TimerService
    from subagents.definitions.spec import AgentSpec
    from subagents.messages import RunRecord
    from subagents.supervision.effects import StartRun
    from subagents.supervision.limits import Limits

    told = []
    class Quiet(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> None:
            told.append([type(message).__name__, message.run_id, message.error_kind])

    class Idle:
        def start(self, checkpoint: Any, pending_mail: Any, recovered: Any = ()) -> None:
            pass

        def on_message(self, message: Any) -> None:
            pass

    def tasks() -> int:
        return len(os.listdir("/proc/self/task"))

    supervisor, timer = Quiet.start(), TimerService()
    d = Dispatcher(size=2, stall_s=0.05, name="t-limit")
    effector = Effector(
        supervisor=supervisor, timer=timer, behaviour_for=lambda spec: lambda port: Idle(),
        on_outside=lambda message: None, on_event=lambda event: None, pool=None,
        dispatcher=d, mail=MailDesk(limits=Limits(), generation=lambda: 0, record=None),
    )
    starts = [
        StartRun(record=RunRecord(run_id=r, agent="idle", task="t", root_run_id=r),
                 spec=AgentSpec(name="idle", description="d"), deadline=0.0)
        for r in ("r1", "r2")
    ]
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks(), hard))  # no thread more
    effector.apply(starts)  # (their starts meet the limit: logged)
    live = sorted(effector.live)
    try:
        effector.stop_all()  # (a store outage, a lost lease, a close: every run stopped)
        stopped = "returned"
    except Exception as exc:
        stopped = f"{type(exc).__name__}: {exc}"
    resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))
    supervisor.stop()  # (after what it was told)
    print(json.dumps({"live": live, "stop_all": stopped, "left": sorted(effector.live),
                      "told": sorted(told)}))
    timer.stop()
    d.close(10.0)
    """
)


def test_starts_at_the_thread_limit_fail_their_runs_and_stopping_every_run_returns() -> None:
    """Runs whose actors found no thread at their start are not kept live (an actor that
    never ran: nothing would tell it to try again): each run is reported failed to the
    supervisor (``no_thread``: tests/runtime/test_start_thread_limit.py through a runtime),
    and ``Effector.stop_all`` (what a store outage, a lost lease, a cluster host's close
    call) returns. (Before that report, they were kept live and each stop's tell raised
    ``NoThread``; the first raise escaped ``stop_all``, the other runs left live and the
    outage's callers never told.)"""
    done = subprocess.run(
        [*_unprivileged(), sys.executable, "-c", _STOP_ALL],
        capture_output=True,
        text=True,
        timeout=WAIT * 4,
        env=os.environ,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["live"] == [], seen
    assert seen["told"] == [["RunFinished", r, "no_thread"] for r in ("r1", "r2")], seen
    assert seen["stop_all"] == "returned", seen
    assert seen["left"] == [], seen
