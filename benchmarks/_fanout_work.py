"""_fanout_work: the Python and builtin calls per child of ``fanout.py``'s runtime fan-out.

``fanout.py`` times the fan-out (1,000 LLM workers on the scripted model, one 50 ms turn
each, 100 at once) and reports its CPU per child; on a loaded machine that CPU is noise.
This counts instead: the same fan-out (``fanout.runtime``) with a profile hook on every
thread (``spawn.Calls``' way), the calls per child by role (the supervisor's thread, the
agents' dispatcher threads, the caller's, the others'), after a warm-up fan-out. Unlike
``_llm_spec_work.py`` (one lone run at a time) it sees a child as the fan-out has it: spawned
by a parent, queued, admitted as a slot frees, its model call blocking, its end decided among
other children's reports, its outcome handed to the waiting parent.

Usage: ``python benchmarks/_fanout_work.py [--children N] [--top K]``; prints one JSON
object (``--top``: also the K functions with the most calls per child, by role).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections import Counter
from typing import Any

import fanout
from _common import quiet_logs
from spawn import role_of


class _Counter:
    """Calls per role (and per role and function, when ``by_function``)."""

    def __init__(self, by_function: bool) -> None:
        self.by_role: Counter[str] = Counter()
        self.by_function: Counter[tuple[str, str]] = Counter()
        self.functions = by_function
        self.counting = False

    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if not self.counting or event not in ("call", "c_call"):
            return
        role = role_of(threading.current_thread().name)
        self.by_role[role] += 1
        if self.functions:
            name = frame.f_code.co_qualname if event == "call" else f"C:{arg.__qualname__}"
            self.by_function[(role, name)] += 1


def count(children: int, top: int) -> dict[str, Any]:
    """The calls per child of a fan-out of ``children`` (100 at once, 50 ms each)."""
    counter = _Counter(by_function=top > 0)
    threading.setprofile(counter.hook)
    sys.setprofile(counter.hook)
    try:
        fanout.runtime(100, 100, 0.05, fanout._Gauge())  # warm-up (threads made, imports)
        counter.counting = True
        fanout.runtime(children, 100, 0.05, fanout._Gauge())
        counter.counting = False
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type,unused-ignore]  # (None: unset)
    out: dict[str, Any] = {
        f"calls_{role}": round(n / children, 1) for role, n in sorted(counter.by_role.items())
    }
    out["calls_all"] = round(sum(counter.by_role.values()) / children, 1)
    if top:
        out["top"] = [
            f"{n / children:.2f} {role} {name}"
            for (role, name), n in counter.by_function.most_common(top)
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--children", type=int, default=300)
    parser.add_argument("--top", type=int, default=0)
    args = parser.parse_args()
    quiet_logs()
    print(json.dumps(count(args.children, args.top), indent=1))


if __name__ == "__main__":
    main()
