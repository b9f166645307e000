"""Where mail goes, decided by the mail room (``mailroom``) before it records anything: an
address resolved to one run, and what a mail to that run becomes now.

Why its own part: resolving reads only the run table and the records of runs it does not
hold (``read_run``), and decides nothing but a run id (or a ValueError naming what was wrong
with the address, the candidates listed); what the mail then comes to (kept, delivered, a
dead letter, a command for another runtime) stays ``MailRoom``'s. Topic addresses
(``topic:NAME``) are not resolved here: they name subscribers, not a run (``topics``).
"""

from __future__ import annotations

from collections.abc import Callable

from subagents.messages import MailState, RunRecord, RunStatus, SendMail
from subagents.supervision.runs import RunState, RunTable

Destination = tuple[MailState | None, RunRecord | None, RunState | None]
"""What a mail to one run becomes now (``delivered``, ``accepted`` for a queued run,
``dead``, or None: another runtime hosts it), the run's record, and its state if held."""

_ROUTES_MAX = 4096


class Addresses:
    """Mail addresses resolved against the runs of ``runs`` (and remembered)."""

    def __init__(self, runs: RunTable, read_run: Callable[[str], RunRecord | None]) -> None:
        self.runs = runs
        self.read_run = read_run
        self._routes: dict[tuple[str, str], str] = {}
        self._routes_generation = -1

    def destination(self, run_id: str) -> Destination:
        target = self.runs.get(run_id)
        record = target.record if target is not None else self.read_run(run_id)
        if record is None or record.status.terminal:
            return MailState.DEAD, record, None
        if target is None:
            return None, record, None
        if record.status is RunStatus.QUEUED:
            return MailState.ACCEPTED, record, target
        return MailState.DELIVERED, record, target

    def resolve(self, msg: SendMail) -> str:
        """A run id, or an agent name within the sender's root tree. Raises ValueError.

        Resolutions are remembered per (sender, address as written) until a run is added,
        ends or is forgotten: a mail stream resolves a name once, not once per mail."""
        if self._routes_generation != self.runs.generation or len(self._routes) >= _ROUTES_MAX:
            self._routes.clear()
            self._routes_generation = self.runs.generation
        key = (msg.sender, msg.to)
        recipient = self._routes.get(key)
        if recipient is None:
            recipient = self._routes[key] = self._resolve_anew(msg)
        return recipient

    def _resolve_anew(self, msg: SendMail) -> str:
        sender = self.runs.get(msg.sender)
        target = msg.to.strip()
        if not target:
            raise ValueError("no recipient given")
        held = self.runs.get(target)
        record = held.record if held is not None else self.read_run(target)
        if record is not None:
            if sender is not None and record.root_run_id != sender.record.root_run_id:
                raise ValueError(
                    f"run {target} belongs to another tree; a run can only write to runs of"
                    " its own tree"
                )
            if target == msg.sender:
                raise ValueError("a run cannot send mail to itself")
            return target
        if sender is None:
            raise ValueError(f"no run with id {target!r}")
        tree = [
            s
            for r in self.runs.tree.in_root(sender.record.root_run_id)
            if (s := self.runs.get(r)) is not None
        ]
        named = [s for s in tree if s.record.agent == target and s.run_id != msg.sender]
        live = [s for s in named if not s.record.status.terminal]
        if len(live) == 1:
            return live[0].run_id
        if len(live) > 1:
            candidates = ", ".join(f"{s.run_id} ({s.record.status})" for s in live)
            raise ValueError(f"{target!r} is ambiguous: several live runs: {candidates}")
        if len(named) == 1:
            return named[0].run_id  # finished: becomes a dead letter, sender is told
        if named:
            ended = ", ".join(f"{s.run_id} ({s.record.status})" for s in named)
            raise ValueError(
                f"{target!r} is ambiguous: no live run, several that ended: {ended}; use a run id"
            )
        others = sorted({f"{s.record.agent} ({s.run_id})" for s in tree if s.run_id != msg.sender})
        listing = ", ".join(others) if others else "none"
        raise ValueError(f"no run named {target!r} in this tree; candidates: {listing}")
