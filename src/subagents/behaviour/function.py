"""Function agents: a Python callable as an agent, with the same limits, events and reports.

``def fn(ctx) -> result`` runs to completion on the agent's thread. ``async def fn(ctx)`` can
also wait: it awaits ``ctx.spawn(...)``, ``ctx.receive()``, ``ctx.send(...)``,
``ctx.gather(...)``. The coroutine is driven by the agent's actor without asyncio: each
``await`` on a context operation hands the actor a ``Pending``; the actor goes back to its
mailbox and resumes the coroutine when the answer arrives, so waiting on a child never blocks
a thread.
"""

from __future__ import annotations

import inspect
import itertools
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

import msgspec

from subagents.behaviour.port import AgentPort
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChildDone,
    Continue,
    DeliverMail,
    DeliverMails,
    Mail,
    MailAck,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    Wake,
)


class SpawnRefused(Exception):
    """The supervisor refused a spawn: unknown agent, a spawn rule, the depth limit or the
    queue bound; the message names which (concurrency limits never refuse: they queue)."""


class MailError(Exception):
    """Mail could not be sent (unknown or ambiguous recipient, dead letter...)."""


class StopError(Exception):
    """A stop was refused (not a descendant, already ended...)."""


_UNSET: Any = object()

_SPAWN_POLICIES = frozenset(
    {"token_budget", "cost_budget_usd", "on_failure", "max_retries", "share", "inherit_messages"}
)


class Pending:
    """Something a function agent awaits: resolved by a message from the supervisor."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.value: Any = _UNSET
        self.error: BaseException | None = None

    @property
    def resolved(self) -> bool:
        return self.value is not _UNSET or self.error is not None

    def resolve(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.resolved:
            self.value, self.error = value, error

    def __await__(self) -> Generator[Pending, Any, Any]:
        return (yield self)


class PendingAll(Pending):
    """Resolved when every part is; its value is the list of values (first error raised)."""

    def __init__(self, key: str, parts: tuple[Pending, ...]) -> None:
        super().__init__(key)
        self.parts = parts
        self._first_open = 0
        self.refresh()

    def refresh(self) -> None:
        """Called whenever a part may have resolved. Parts never unresolve, so a cursor over
        them makes a gather of n parts O(n) in all (rescanning them all made it O(n^2))."""
        if self.resolved:
            return
        parts, i = self.parts, self._first_open
        while i < len(parts) and parts[i].resolved:
            i += 1
        self._first_open = i
        if i < len(parts):
            return
        for part in self.parts:
            if part.error is not None:
                self.resolve(error=part.error)
                return
        self.resolve([p.value for p in self.parts])


@dataclass(frozen=True)
class FunctionAgent:
    """A callable registered as an agent, with the definition the runtime admits it by."""

    spec: AgentSpec
    fn: Callable[..., Any]

    @classmethod
    def create(
        cls, name: str, fn: Callable[..., Any], description: str = "", **fields: Any
    ) -> FunctionAgent:
        doc = description or inspect.getdoc(fn) or f"Python function {fn.__name__}"
        # metadata={"allowSelfSpawn": True} (say) is kept beside the runtime's own key
        metadata = {**dict(fields.pop("metadata", None) or {}), "function": True}
        spec = AgentSpec(name=name, description=doc, model="none", metadata=metadata, **fields)
        return cls(spec=spec, fn=fn)


class AgentContext:
    """What a function agent can do: spawn, mail, stop, and read about its run."""

    def __init__(self, behaviour: FunctionBehaviour) -> None:
        self._b = behaviour
        record = behaviour.port.record
        self.run_id = record.run_id
        self.agent = record.agent
        self.task = record.task
        self.context = record.context
        self.depth = record.depth
        self.parent_run_id = record.parent_run_id
        self.root_run_id = record.root_run_id
        self.shared: dict[str, Any] = dict(record.shared)
        """Shared context handed down to this run (``share=`` keys of its spawn)."""

    @property
    def log(self) -> Any:
        """This run's structlog logger (bound lazily by the port: most runs never log)."""
        return self._b.port.log

    def spawn(
        self,
        agent: str,
        task: str,
        *,
        context: str | None = None,
        background: bool = False,
        timeout: float | None = None,
        model: str | None = None,
        label: str | None = None,
        **policies: Any,
    ) -> Pending:
        """Start a child now. Awaiting gives its Outcome (background: its run id).

        ``policies``: ``token_budget``, ``cost_budget_usd``, ``on_failure``, ``max_retries``,
        ``share`` (shared-context keys to copy), ``inherit_messages`` (docs/supervision.md).
        """
        unknown = set(policies) - _SPAWN_POLICIES
        if unknown:
            raise TypeError(f"spawn() got unknown options: {', '.join(sorted(unknown))}")
        if "share" in policies:
            share = policies["share"]
            policies["share"] = (share,) if isinstance(share, str) else tuple(share)
        pending = self._b.new_pending("s")
        self._b.background[pending.key] = background
        if self._b.replay(pending.key):
            return pending  # spawned by an earlier start: its answers are replayed
        self._b.port.request_spawn(
            SpawnRequest(
                request_id=pending.key,
                agent=agent,
                task=task,
                parent_run_id=self.run_id,
                context=context,
                background=background,
                timeout=timeout,
                model=model,
                label=label,
                **policies,
            )
        )
        return pending

    def send(self, to: str, content: str, reply_to: str | None = None) -> Pending:
        """Send mail to a run id or an agent name of this tree. Awaiting gives the mail id."""
        pending = self._b.new_pending("m")
        if self._b.replay(pending.key):
            return pending  # sent by an earlier start: not sent twice
        port = self._b.port
        port.send_mail(
            SendMail(
                request_id=pending.key,
                sender=self.run_id,
                to=to,
                content=content,
                reply_to=reply_to,
            )
        )
        if self._b.coro is None:
            # A plain function does not hand control back to its actor until it returns (it
            # may block): its mail must not wait for that. A coroutine's mail goes when it
            # next awaits something it has to wait for, together with the rest of the step.
            port.flush_reports()
        return pending

    def receive(self, timeout: float = 30.0) -> Pending:
        """Awaiting gives the next unread Mail, or None when ``timeout`` passes first."""
        pending = self._b.new_pending("w")
        if self._b.inbox:
            pending.resolve(self._b.take_one())
        else:
            self._b.receivers.append(pending)
            self._b.port.wake_after(pending.key, max(0.0, timeout))
        return pending

    def mailbox(self) -> list[Mail]:
        """Every unread mail, now, without waiting."""
        return self._b.take_all()

    def stop(self, run_id: str) -> Pending:
        """Stop one of this run's descendants. Awaiting gives the ids stopped."""
        pending = self._b.new_pending("x")
        self._b.port.request_stop(
            StopRequest(
                request_id=pending.key,
                run_id=run_id,
                requester=self.run_id,
                reason=f"stopped by {self.agent} ({self.run_id})",
            )
        )
        return pending

    def gather(self, *pendings: Pending) -> Pending:
        """Await several operations together; values in order (first error raised)."""
        group = PendingAll(self._b.new_key("g"), tuple(pendings))
        self._b.groups.append(group)
        return group


class FunctionBehaviour:
    """Runs a callable; drives it as a coroutine when it is ``async``."""

    def __init__(self, fn: Callable[..., Any], port: AgentPort) -> None:
        self.fn = fn
        self.port = port
        self.pendings: dict[str, Pending] = {}
        self.recovered: dict[str, list[Any]] = {}
        self.groups: list[PendingAll] = []
        self.background: dict[str, bool] = {}
        self.receivers: deque[Pending] = deque()
        self.inbox: deque[Mail] = deque()
        self.awaiting: Pending | None = None
        # The supervisor hears "waiting" once, at the first await, and not again. A message
        # that resumes the coroutine is handled to its next await (or its end) before the
        # actor reads its mailbox again; telling "running" then "waiting" around it cost two
        # supervisor messages and two store writes per mail received (half the supervisor's
        # work in a mail stream). The price: code that computes for long between two awaits
        # shows as waiting meanwhile.
        self.told_waiting = False
        self.coro: Coroutine[Any, Any, Any] | None = None
        self.ended = False
        self._keys = itertools.count()

    def new_key(self, kind: str) -> str:
        return f"{self.port.record.run_id}:{kind}{next(self._keys)}"

    def replay(self, key: str) -> bool:
        """Hand ``key``'s pending the answers an earlier start got; False if there are none."""
        answers = self.recovered.pop(key, None)
        if not answers:
            return False
        for message in answers:
            self.on_message(message)
        return True

    def new_pending(self, kind: str) -> Pending:
        pending = Pending(self.new_key(kind))
        self.pendings[pending.key] = pending
        return pending

    def take_one(self) -> Mail:
        mail = self.inbox.popleft()
        self.port.mail_read((mail.mail_id,))
        return mail

    def take_all(self) -> list[Mail]:
        taken, self.inbox = list(self.inbox), deque()
        if taken:
            self.port.mail_read(tuple(m.mail_id for m in taken))
        return taken

    def unread_mail(self) -> tuple[str, ...]:
        return tuple(m.mail_id for m in self.inbox)

    def start(
        self, _checkpoint: Any, pending_mail: tuple[Mail, ...], recovered: tuple[Any, ...] = ()
    ) -> None:
        """Call the function. After a crash or a restart it runs again from the top, and its
        ``ctx.spawn`` / ``ctx.send`` calls are matched, in order, to what the earlier start
        already did (``recovered``): a child already spawned is not spawned again (its outcome
        is replayed, or awaited if it is still running), a mail already sent is not resent.
        So the order of those calls should not depend on anything but the task."""
        for message in recovered:
            self.recovered.setdefault(message.request_id, []).append(message)
        self.inbox.extend(pending_mail)
        value = self.fn(AgentContext(self))
        if inspect.iscoroutine(value):
            self.coro = value
            self._advance(None, None)
        else:
            self._finish(value)

    def _finish(self, value: Any) -> None:
        self.ended = True
        if value is None:
            text = ""
        elif isinstance(value, str):
            text = value
        else:
            text = msgspec.json.encode(value).decode()
        self.port.finish(text)

    def _advance(self, value: Any, error: BaseException | None) -> None:
        assert self.coro is not None
        while True:
            try:
                yielded = self.coro.throw(error) if error is not None else self.coro.send(value)
            except StopIteration as stop:
                self._finish(stop.value)
                return
            if not isinstance(yielded, Pending):
                error = TypeError(
                    f"a function agent may only await ctx operations, not {yielded!r}"
                )
                value = None
                continue
            if yielded.resolved:
                value, error = yielded.value, yielded.error
                continue
            self.awaiting = yielded
            if not self.told_waiting:
                self.told_waiting = True
                self.port.set_waiting(True)
            return

    def on_message(self, message: Any) -> None:
        if self.ended:
            return
        match message:
            case DeliverMail(mail=mail):  # the most frequent first: cases are tried in order
                self.inbox.append(mail)
                self._hand_out()
            case DeliverMails(mails=mails):
                self.inbox.extend(mails)
                self._hand_out()
            case MailAck(request_id=rid, mail_id=mail_id, error=error):
                if error is not None:
                    self._resolve(rid, error=MailError(error))
                else:
                    self._resolve(rid, mail_id)
            case SpawnReply(request_id=rid, run_id=run_id, error=error):
                if error is not None:
                    self._resolve(rid, error=SpawnRefused(error))
                elif self.background.get(rid):
                    self._resolve(rid, run_id)
            case ChildDone(request_id=rid, outcome=outcome):
                self._resolve(rid, outcome)
            case StopReply(request_id=rid, stopped=stopped, error=error):
                if error is not None:
                    self._resolve(rid, error=StopError(error))
                else:
                    self._resolve(rid, list(stopped))
            case Wake(key=key):
                for receiver in list(self.receivers):
                    if receiver.key == key:
                        self.receivers.remove(receiver)
                        self._resolve(key, None)
            case Continue():
                pass
            case _:
                self.port.log.warning("unexpected message", message=type(message).__name__)

    def _hand_out(self) -> None:
        """Mail arrived: answer the ``receive`` calls waiting for it, in order."""
        while self.receivers and self.inbox:
            receiver = self.receivers.popleft()
            self.port.cancel_wake(receiver.key)
            self._resolve(receiver.key, self.take_one())

    def _resolve(self, key: str, value: Any = None, error: BaseException | None = None) -> None:
        pending = self.pendings.pop(key, None)
        if pending is None:
            return
        pending.resolve(value, error)
        for group in list(self.groups):
            group.refresh()
            if group.resolved:
                self.groups.remove(group)
        awaiting = self.awaiting
        if awaiting is not None and awaiting.resolved and self.coro is not None:
            self.awaiting = None
            self._advance(awaiting.value, awaiting.error)


__all__ = [
    "AgentContext",
    "FunctionAgent",
    "FunctionBehaviour",
    "MailError",
    "Pending",
    "SpawnRefused",
    "StopError",
]
