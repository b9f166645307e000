"""The judge's split of the threads a clock wakes (``_instructions.py``): each runs inside a
C function of its own, so callgrind's inclusive cost of that function is the thread's work.

Why: such a thread works per second of wall time, not per unit, and under valgrind the wall
time of a unit stretches with the machine's load (valgrind runs one thread at a time, and a
loaded machine gives the process a fraction of a core), so its instructions per unit moved
with the load: the dispatcher's watch looks at its threads every ``stall_s`` (50 ms), the
log's checkpoint thread passes every 50 ms while something is written (a pass costs the
same for one mail as for a thousand), the lease keeper beats. Python functions all show in
callgrind as ``_PyEval_EvalFrameDefault``; a C function named after the thread's role is a
symbol that shows, and ``--toggle-collect`` is not needed: the parent reads the inclusive
cost of each ``judge_clock_<role>`` in callgrind's output file (``clock_costs``).

The timer's thread is one of them too, measured: it fires a linger (the supervisor's 5 ms
group of reports or commits) or the deadlines' tick (100 ms) once per group, and a group holds
fewer units the slower the wall clock runs, so its work per unit is mostly per wake-up: per
in-memory mail 8.7k instructions with a core of its own (nice -15) against 23.2k at load 18,
per trivial run 6.0k against 21.5k (session 20). What it does per arm (taking it in, the
heap) is left out with it; the arming itself (``tell_at`` on the caller's thread) is counted.
What the lingers' smaller groups cost the supervisor's thread is not left out: that part of
the load's effect stays in the figure (``benchmarks/README.md``, "the judge").

The C functions are compiled at run time (``build``: ``cc`` and nothing else; no Python
header). Without a compiler the judge says so and counts every thread, as before.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

ROLES = ("watch", "checkpoint", "lease", "timer")
"""Roles whose work is per wall second or per wake-up: left out of the figure, printed beside."""
SYMBOL = "judge_clock_"
ENTRY = "judge_enter_"
LIBRARY_ENV = "SUBAGENTS_JUDGE_CLOCK_LIBRARY"


def role_of(thread_name: str) -> str | None:
    """The role of a thread by its name (the runtime names its threads), or None: a thread
    that does the units' work (actors, the dispatcher's workers, the main thread)."""
    if thread_name.endswith("-watch"):  # Dispatcher(name=...)'s watch thread
        return "watch"
    if thread_name == "subagents-wal-checkpoint":
        return "checkpoint"
    if thread_name == "subagents-lease":
        return "lease"
    if thread_name.endswith("-timer"):  # TimerService(name=...), default "subagents-timer"
        return "timer"
    return None


def c_source(roles: Iterable[str] = ROLES) -> str:
    """Per role, a function that calls ``body`` (the thread's ``run``), called by an entry
    that ctypes calls. Why two: libffi's call moves the stack pointer to its own frame, and
    callgrind, which tells a call from a jump by the stack pointer, takes the function ctypes
    calls for a part of libffi's (no symbol of its own); a plain C call from there is a call."""
    return "".join(
        f"static __attribute__((noinline)) void {SYMBOL}{role}(void (*body)(void))"
        f" {{ body(); }}\nvoid {ENTRY}{role}(void (*body)(void)) {{ {SYMBOL}{role}(body); }}\n"
        for role in roles
    )


def build(folder: Path) -> tuple[Path | None, str]:
    """The shared library of the role functions compiled in ``folder``, or None and why."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc): every thread counted"
    source, library = folder / "judge_clock.c", folder / "judge_clock.so"
    source.write_text(c_source())
    done = subprocess.run(  # -O0, no inlining: each role keeps a call of its own
        [compiler, "-shared", "-fPIC", "-O0", "-fno-inline", "-o", str(library), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None, f"cc failed: every thread counted: {done.stderr[-500:]}"
    return library, ""


_BODY = ctypes.CFUNCTYPE(None)


def install(library: Path, started: Counter[str]) -> None:
    """From now on, a thread of a role runs inside its role's C function (``started`` counts
    the threads started, by role or ``work``). ``Thread.run`` replaced, in the judge's child
    process only; an exception of the thread's target is raised again outside the C frame, so
    ``threading.excepthook`` sees it as before."""
    lib = ctypes.CDLL(str(library.resolve()))  # (a bare name: dlopen would search)
    entries = {role: getattr(lib, ENTRY + role) for role in ROLES}
    plain_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        role = role_of(self.name)
        started[role or "work"] += 1
        if role is None:
            plain_run(self)
            return
        failed: list[BaseException] = []

        def body() -> None:
            try:
                plain_run(self)
            except BaseException as exc:  # (raised again below)
                failed.append(exc)

        entries[role](_BODY(body))
        if failed:
            raise failed[0]

    threading.Thread.run = run  # type: ignore[method-assign]


_NAMED = re.compile(r"^c?fn=(?:\((\d+)\))?\s*(\S*)")


def callee_costs(lines: Iterable[str], key: Callable[[str], str | None]) -> Counter[str]:
    """The inclusive instructions of the calls whose callee's name ``key`` maps to a key (not
    None), summed by key, from a callgrind output file (one event, Ir): the cost line after
    each ``calls=`` line whose callee is the last ``cfn=``'s. Names may be compressed:
    ``fn=(3) name`` or ``cfn=(3) name`` the first time, ``cfn=(3)`` after."""
    names: dict[str, str] = {}
    costs: Counter[str] = Counter()
    callee: str | None = None
    after_calls = False
    for line in lines:
        if after_calls:
            after_calls = False
            if callee is not None:
                costs[callee] += int(line.split()[-1])
        elif line.startswith(("fn=", "cfn=")):
            named = _NAMED.match(line)
            ref, name = named.groups() if named else (None, "")
            if ref is not None and name:
                names[ref] = name
            elif ref is not None:
                name = names.get(ref, "")
            if line.startswith("cfn="):
                callee = key(name)
        elif line.startswith("calls="):
            after_calls = True
    return costs


def _role_of_symbol(name: str) -> str | None:
    role = name.removeprefix(SYMBOL) if name.startswith(SYMBOL) else None
    return role if role in ROLES else None


def clock_costs(lines: Iterable[str]) -> dict[str, int]:
    """The inclusive instructions of each role's function (``judge_clock_<role>``), from a
    callgrind output file (``callee_costs``)."""
    costs = callee_costs(lines, _role_of_symbol)
    return {role: costs.get(role, 0) for role in ROLES}
