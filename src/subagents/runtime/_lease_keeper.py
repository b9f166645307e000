"""The lease keeper: one thread per Runtime that keeps its lease in the store alive.

Why a thread of its own: the lease says the *process* is alive, so it must not wait behind the
supervisor's work (a long burst of mail) or the timer's callbacks; a renewal is one small
write every ``lease_s / 3`` seconds. A renewal that fails (the store is busy or broken) is
logged and tried again at the next tick: the lease lasts three ticks. A renewal that finds
the lease gone means another process took this runtime's runs over after the lease lapsed
(the process was stalled), or took it again under the same owner; ``on_lost`` is called once
and the keeper ends (the supervisor says so in its one log line: ``actors.outage``).

The lease's epoch (a number the store gives each taking of a lease) is the runtime's
``fence``: every write transaction of its supervisor checks it first (``store.fencing``), so a
host that wakes after its runs were taken over writes nothing, whichever of its threads
notices first.

The keeper also publishes its lease line (``tools.lease_line``): a deadline, earlier than any
takeover, past which every process its runs started is killed by its own reaper, so that a
host stalled past its lease leaves no command acting in a workspace another runtime took.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import msgspec

from subagents.logs import get_logger
from subagents.store.base import RunStore
from subagents.store.fencing import Fence
from subagents.store.leases import lease_for
from subagents.tools.lease_line import LeaseLine, clock, deadline

log = get_logger("subagents.leases")


class LeaseKeeper:
    """Writes the lease of ``owner`` now, renews it until ``close``, then releases it."""

    def __init__(
        self,
        store: RunStore,
        owner: str,
        lease_s: float,
        *,
        on_lost: Callable[[str], object],
        line: LeaseLine | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.lease_s = lease_s
        self.started_at = time.time()
        self._on_lost = on_lost
        self._stop = threading.Event()
        self.line = line
        """Where the deadline of this runtime's commands is published (None: not)."""
        before = clock()
        epoch = store.acquire_lease(lease_for(owner, lease_s, started_at=self.started_at))
        self.fence = Fence(owner, epoch)
        """What this runtime's writes are fenced with."""
        self._publish(before)
        self.thread = threading.Thread(target=self._loop, name="subagents-lease", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        every = self.lease_s / 3
        while not self._stop.wait(every):
            before = clock()  # before ``lease_for``: the line is earlier than the lease
            lease = msgspec.structs.replace(
                lease_for(self.owner, self.lease_s, started_at=self.started_at),
                epoch=self.fence.epoch,
            )
            try:
                held = self.store.renew_lease(lease)
            except Exception as exc:
                log.warning("lease not renewed; trying again", owner=self.owner, error=str(exc))
                continue
            if not held and not self._stop.is_set():
                reason = (
                    f"the lease of {self.owner} (epoch {self.fence.epoch}) lapsed and another"
                    " process took its runs over"
                )
                self._on_lost(reason)
                return
            if held:
                self._publish(before)

    def _publish(self, before: float) -> None:
        """The line of a renewal; a line that cannot be written (a full disk under a
        copy-on-write file system) keeps the earlier one (the commands die early), never
        the renewals: an exception here would end this thread, and the lease with it."""
        if self.line is None:
            return
        try:
            self.line.publish(deadline(self.lease_s, before))
        except OSError as exc:
            log.warning("lease line not published", owner=self.owner, error=str(exc))

    def close(self, timeout: float = 5.0) -> None:
        """Stop renewing and delete the lease (its runs have ended or been cancelled)."""
        self._stop.set()
        if self.thread is not threading.current_thread():
            self.thread.join(timeout)
        with contextlib.suppress(Exception):  # a closed or broken store: the lease lapses
            self.store.release_lease(self.owner, self.fence.epoch)  # not a later taking's
        if self.line is not None:
            self.line.close()
