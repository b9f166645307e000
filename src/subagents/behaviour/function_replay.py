"""How a function agent's calls are matched to its journal on replay: a call's fingerprint
(``call_digest``), how an error shows a call (``shown_call``), the answer an earlier start was
handed (``seen_result``), and the error of a replay that went another way (``ReplayDiverged``,
error kind ``NONDETERMINISTIC``). Why replay is exact: ``behaviour.function``'s docstring.
"""

from __future__ import annotations

import zlib
from typing import Any

from subagents.messages import JournalEntry


class ReplayDiverged(Exception):
    """A resumed function agent made another call than its earlier start at the same position.

    The run has already failed (error kind ``nondeterministic_replay``) when this is raised;
    catching it changes nothing."""


NONDETERMINISTIC = "nondeterministic_replay"
"""The error kind of a run whose replay diverged from its journal."""


def call_digest(*parts: Any) -> int:
    """A fingerprint of a call's arguments, the same in every process (``hash`` is not).
    Kept cheap: it is taken for every call, and a mail stream makes one call per mail."""
    return zlib.crc32("\x00".join(map(str, parts)).encode("utf-8", "surrogatepass"))


def shown_call(kind: str, args: tuple[Any, ...]) -> str:
    """A call as the error of a diverged replay shows it: ``spawn('worker', 'the task')``."""
    parts = []
    for arg in args:
        text = repr(arg)
        parts.append(text if len(text) <= 40 else text[:37] + "...")
    return f"{kind}({', '.join(parts)})"


CONSTANT_CALLS = {
    "receive": "receive()",
    "mailbox": "mailbox()",
    "sleep": "sleep(...)",
    "gather": "gather(...)",
    "wait_any": "wait_any(...)",
    "stop_children": "stop_children()",
}
"""How a diverged replay's error shows a call whose journal entry keeps no text of it."""


def seen_result(replayed: list[JournalEntry] | None) -> JournalEntry | None:
    """The result entry an earlier start wrote for a call, if it got that far."""
    if replayed is None:
        return None
    return next((e for e in replayed if e.observed), None)
