"""NodeLease: the driver's lease line, kept on a node host's machine for the commands of the
runs it hosts.

Why: a runtime whose runs live on node hosts holds their lease in its driver. Stalled past
it (SIGSTOP, a swapped-out VM), its runs are taken over by another runtime, while its node
hosts, not stopped, go on: a Bash command or a stdio MCP server they started went on
acting on the workspace until the driver woke and learnt it had lost its lease (session 28
left it: the driver's own commands die at its lease line, ``tools/lease_line.py``; a node's
had none). A node cannot read the driver's line (another machine, another clock), so it asks
(``actors.remote.LeaseLeft``) and keeps a line of its own, which its commands' reapers read
as the driver's read its line.

Why it is sound across two clocks: the node reads its clock (``before``) before it asks; the
driver answers with what its line has left when it reads its own clock, which is later (the
ask was on its way); so ``before + left`` on the node's clock is no later than the driver's
line. A slow answer makes the node's line early, never late; no answer (the driver stalled,
the link cut) publishes nothing, and the commands die at the line last published. The node
asks again well before its line passes (at half of what was left, at most every
``MOST_S``): a lease of a second (tests) has its line renewed every quarter second or so.

Where a node's runs' commands start before the first answer (the first moments after a
set-up: the driver takes its lease just after its nodes are set up, and is asked again
every ``LEAST_S`` until then) they get no line (as on a driver whose line is not yet
published); after it, each gets this line (``ProcessGroups.lease_env``,
``McpHub.lease_env``). A driver that keeps no line (a memory store: no other process can
take its runs) answers None: nothing is published, and the node asks again later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from subagents.logs import get_logger
from subagents.tools.lease_line import LeaseLine, clock

log = get_logger("subagents.cluster")

MOST_S = 1.0
"""The longest wait between two asks."""
LEAST_S = 0.05
"""The shortest (a line that has almost nothing left, or a failed ask)."""
ASK_S = 10.0
"""How long one ask waits for its answer (the line passes meanwhile if it must)."""
EARLY_S = 10.0
"""For this long after a set-up a driver that keeps no line yet is asked again every
``LEAST_S`` (it takes its lease just after its nodes are set up, and a command started
before the node's first line gets none), then every ``MOST_S`` (a driver on a memory store
keeps none)."""


class NodeLease:
    """Asks ``ask(timeout)`` (seconds the driver's line has left, or None), once each
    ``renew``, on a thread of its own from ``start`` until ``close``, and publishes each
    answer on the node's clock; ``on_line`` is told once, at the first line published (the
    node's processes take its environment from then on)."""

    def __init__(
        self,
        ask: Callable[[float], float | None],
        on_line: Callable[[LeaseLine], None],
    ) -> None:
        self.line = LeaseLine()
        self._ask = ask
        self._on_line: Callable[[LeaseLine], None] | None = on_line
        self._stop = threading.Event()
        self._nones = 0
        self.given = False
        """Whether the node's processes have the line (its first publication came)."""
        self.thread = threading.Thread(target=self._loop, name="subagents-node-lease")
        self.thread.daemon = True

    def start(self) -> NodeLease:
        self.thread.start()
        return self

    def _loop(self) -> None:
        wait = 0.0
        while not self._stop.wait(wait):
            wait = self.renew()

    def renew(self) -> float:
        """One ask, its answer published; how long to wait before the next."""
        before = clock()  # before the ask: the driver reads its clock later (the module)
        try:
            left = self._ask(ASK_S)
        except Exception as exc:  # no answer: the line last published stands
            log.debug("the driver's lease line not read", error=repr(exc)[:200])
            return LEAST_S
        if left is None:  # (not yet: the driver takes its lease after its nodes' set-up)
            self._nones += 1
            return LEAST_S if self._nones * LEAST_S < EARLY_S else MOST_S
        try:
            self.line.publish(before + left)
        except OSError as exc:  # (the line last published stands: the commands die early)
            log.warning("the node's lease line not published", error=str(exc))
            return LEAST_S
        told, self._on_line = self._on_line, None
        if told is not None:
            told(self.line)
            self.given = True
        return min(MOST_S, max(LEAST_S, left / 2))

    def close(self) -> None:
        """Stop asking and let the line go (the node's commands were killed first); an ask
        under way is not waited for (its answer publishes nothing on a closed line)."""
        self._stop.set()
        self.line.close()
