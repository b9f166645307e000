"""Function agents: a Python callable as an agent, with the same limits, events and reports.

``def fn(ctx) -> result`` runs to completion on the agent's thread. ``async def fn(ctx)`` can
also wait: it awaits ``ctx.spawn(...)``, ``ctx.receive()``, ``ctx.send(...)``,
``ctx.stop(...)``, ``ctx.stop_children()``, ``ctx.sleep(...)``, ``ctx.gather(...)``,
``ctx.wait_any(...)``. The coroutine is driven by the
agent's actor without asyncio: each ``await`` on a context operation hands the actor a
``Pending``; the actor goes back to its mailbox and resumes the coroutine when the answer
arrives, so waiting on a child never blocks a thread.

Exact replay. Every context call is journaled (``JournalEntry``, through the supervisor, the
store's one writer): the call when it is made (a ``receive`` that waits: when it is answered,
or when another call comes first), and what the function was handed when that is not already
in another record (the mail a ``receive`` took, a timeout, the mail a ``mailbox()`` read
took, a stop's answer, an error). After a crash (or a restart) the
function runs again from the top, and each call is matched, by its position, to the journal:
a call already made is not made again, it is handed what it was handed before (a child's
outcome from the child's record, the same mail, the same timeout...), and a call at a
position where the earlier start did something else fails the run with a "non-deterministic
replay" error instead of doing things twice. Past the end of the journal, calls are live.

Why that is exact even if the process dies at any instant: journal entries reach the
supervisor ahead of every report the function made after them (``AgentPort.journal``), the
supervisor writes them in that order, and nothing the function did after seeing a result is
made durable, or visible to another run, before the transaction holding that result's entry
is committed (a mail taken straight, its sender's own commit, carries the entries before it:
``supervision/unsaved_journal.py``). So a crash keeps a prefix of what the function did, its
journal included, and a result the crash lost was seen by nothing that survived it.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from types import CoroutineType, MappingProxyType
from typing import Any

import msgspec

from subagents.behaviour.awaitables import Pending, PendingAll, PendingAny
from subagents.behaviour.failures import (
    BASE_EXCEPTION,
    NO_EVENT_LOOP,
    BadAwait,
    bad_await,
    raised,
    shown_repr,
)
from subagents.behaviour.function_context import AgentContext, MailError, SpawnRefused, StopError
from subagents.behaviour.function_replay import (
    CONSTANT_CALLS,
    NONDETERMINISTIC,
    ReplayDiverged,
    shown_call,
)
from subagents.behaviour.port import AgentPort
from subagents.blocking import about_to_block, done_blocking
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChildDone,
    Continue,
    DeliverMail,
    JournalEntry,
    Mail,
    MailAck,
    Replay,
    SpawnReply,
    StopReply,
    Wake,
)
from subagents.supervision.parking import BRIEF_SLEEP_S
from subagents.supervision.requests import encoding_problem, value_problem

BAD_RESULT = "bad_result"
"""The error kind of a run whose returned value cannot be encoded (or is too large)."""

_encoder = msgspec.json.Encoder()

_NONE_YET: Any = MappingProxyType({})
"""The class default of ``FunctionBehaviour``'s journal maps: read-only, so that a write
meant for a run's own map can never land in one every run shares (it raises instead)."""


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


def _returned(value: Any) -> str:
    """``the function returned a builtins.list``: the start of a ``bad_result`` error."""
    return f"the function returned a {type(value).__module__}.{type(value).__qualname__}"


_NO_KEYS: frozenset[str] = frozenset()
"""No brief sleeps (every run's, until its first). A run's ``brief_sleeps`` and ``groups``
(its ``gather``s and ``wait_any``s not resolved yet, in the order made) are replaced, never
changed in place: most runs make neither, and the shared empty frozenset and an empty tuple
are no objects of theirs, where a set and a list were two more per waiting run for the GC
to walk (``benchmarks/scale.py``'s 100,000)."""


def _add_mail(b: FunctionBehaviour, mails: Iterable[Mail]) -> None:
    """``mails`` to ``b``'s inbox, after what it holds. A run's inbox is the empty tuple
    until mail comes (then its ``deque``, kept), and the ``receive`` calls waiting for it
    a list: an empty ``deque`` is 760 bytes, and a waiting run held two (its inbox, empty;
    its one waiting call), ~1.5 KB of ~8.6 KB (``benchmarks/scale.py``'s 100,000)."""
    inbox = b.inbox
    if type(inbox) is deque:
        inbox.extend(mails)
    elif mails:
        b.inbox = deque(mails)


class FunctionBehaviour:
    """Runs a callable; drives it as a coroutine when it is ``async``."""

    # What an earlier start did: empty (the class's read-only defaults) until a resumed
    # start loads it (``_recover``), which makes the run's own. Most starts resume nothing:
    # five dicts made and freed per run, and kept by every waiting run, for nothing.
    recovered: dict[str, list[Any]] = _NONE_YET
    """The answers the earlier starts got, by call key, not replayed yet."""
    journaled: dict[str, list[JournalEntry]] = _NONE_YET
    """The journal of the earlier starts, by call key, not replayed yet."""
    mails: Mapping[str, Mail] = _NONE_YET
    """The mail the journal says was taken, by id."""
    sent: Mapping[str, Mail] = _NONE_YET
    """The mail the earlier starts sent, by call key (what a replayed send is checked
    against, and what a diverged replay's error shows)."""
    agents: Mapping[str, str] = _NONE_YET
    """The agent of each run of the tree, by run id (a send may name its recipient so)."""

    def __init__(
        self, fn: Callable[..., Any], port: AgentPort, *, is_async: bool | None = None
    ) -> None:
        """``is_async``: whether ``fn`` is a coroutine function, when its factory knows
        (``factory``); else found out here."""
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn) if is_async is None else is_async
        self.port = port
        record = port.record
        self.prefix = (
            f"{record.run_id}:" if not record.retries else f"{record.run_id}:{record.retries}."
        )
        """Keys of this generation's calls (a retry starts anew: its keys differ)."""
        self.pendings: dict[str, Pending] = {}
        self.groups: tuple[PendingAll | PendingAny, ...] = ()  # (replaced: ``_NO_KEYS``)
        self.background: dict[str, bool] = {}
        self.receivers: list[Pending] = []  # (the calls waiting for mail: ``_add_mail``)
        self.unjournaled: str | None = None
        """The key of a live ``receive`` that waits and whose call is not journaled yet: its
        entry is made when the function makes another call first (``call``); answered first,
        the entry of what it was handed says both (``hand_out``, a timeout's). Past the end
        of the journal a call is live, so a crash that loses it loses nothing a replay needs:
        one entry fewer per mail received by waiting."""
        self.sleepers: dict[str, Pending] = {}
        self.brief_sleeps: frozenset[str] = _NO_KEYS
        """The sleepers of at most ``parking.BRIEF_SLEEP_S``: awaiting one alone is not
        waiting (below)."""
        self.brief_sleep_left = BRIEF_SLEEP_S
        """How much more of this start's sleeping may be brief: the brief sleeps of a run
        add up to at most ``BRIEF_SLEEP_S``, so a loop of short sleeps (polling for a queued
        child's mail) is waiting, and lends its slot, once they have added up to more."""
        self.inbox: deque[Mail] | tuple[()] = ()  # (none until mail comes: ``_add_mail``)
        self.awaiting: Pending | None = None
        # The supervisor hears "waiting" once, at the first await, and not again. A message
        # that resumes the coroutine is handled to its next await (or its end) before the
        # actor reads its mailbox again; telling "running" then "waiting" around it cost two
        # supervisor messages and two store writes per mail received (half the supervisor's
        # work in a mail stream). The price: code that computes for long between two awaits
        # shows as waiting meanwhile. Awaiting a brief sleep alone is not waiting: the run
        # resumes on its own, so it keeps its slot as a blocking call would, and is never
        # asked to park for it (supervision/parking.py ``BRIEF_SLEEP_S``).
        self.told_waiting = False
        self.coro: Coroutine[Any, Any, Any] | None = None
        self.ended = False
        self._positions = itertools.count()

    @classmethod
    def factory(cls, fn: Callable[..., Any]) -> functools.partial[FunctionBehaviour]:
        """What makes the behaviour of each run of ``fn`` (``factory(port)``), whether ``fn`` is
        a coroutine function found out once, not at every run's start."""
        return functools.partial(cls, fn, is_async=inspect.iscoroutinefunction(fn))

    # ---- calls and their journal -------------------------------------------------------------

    def unheld(self) -> None:
        """A plain function does not hand control back to its actor until it returns (it may
        block): what it reports (mail, spawns, stops) must not wait for that. A coroutine's
        reports go when it next awaits something it has to wait for, together with the rest
        of the step (one Batch: its spawns all admitted before any child acts)."""
        if self.coro is None:
            self.port.flush_reports()

    def call(self, kind: str, digest: int, *shown: Any) -> tuple[str, list[JournalEntry] | None]:
        """The next call (``digest``: of its arguments; ``shown``: the ones an error shows):
        its key, and the journal entries of the earlier start for it when it is replayed
        (None: a live call, which its maker journals)."""
        if self.ended:
            raise RuntimeError(f"{kind}(): this run has ended")
        if self.unjournaled is not None:  # its entry goes before any later call's
            self.port.journal(JournalEntry(request_id=self.unjournaled, kind="receive"))
            self.unjournaled = None
        key = self.prefix + str(next(self._positions))
        if not self.journaled:  # the common case: live
            return key, None
        replayed = self.journaled.pop(key, None)
        if replayed is None:  # the journal goes on, yet has nothing for this position
            self.diverge(key, "a call the journal has no record of", shown_call(kind, shown))
        elif replayed[0].kind != kind or replayed[0].digest != digest:
            self.diverge(key, self.described(key, replayed[0]), shown_call(kind, shown))
        return key, replayed

    def described(self, key: str, made: JournalEntry) -> str:
        """The call an earlier start made, for an error: its text, or its mail's record."""
        if made.call:
            return made.call
        mail = self.sent.get(key)
        if made.kind == "send" and mail is not None:
            return shown_call("send", (mail.recipient, mail.content))
        return CONSTANT_CALLS.get(made.kind, f"{made.kind or 'something else'}(...)")

    def same_mail(self, mail: Mail, to: str, content: str, reply_to: str | None) -> bool:
        """Whether a replayed send is the one that made ``mail`` (its recipient by run id or
        by agent name, or its topic, its content, its reply_to)."""
        return (
            mail.content == content
            and mail.reply_to == reply_to
            and (
                to == mail.address or (mail.topic is None and to == self.agents.get(mail.recipient))
            )
        )

    def diverge(self, key: str, before: str, now: str) -> None:
        """The replay went another way than the journal: fail the run, never redo things."""
        position = key[len(self.prefix) :]
        record = self.port.record
        message = (
            f"non-deterministic replay of {record.agent} ({record.run_id}): at call"
            f" {position} its earlier start called {before}, this start {now}; a function"
            " agent must make the same calls in the same order when its calls return the"
            " same results (no randomness, clock or outside state deciding them)"
        )
        self.ended = True
        self.port.fail(NONDETERMINISTIC, message)
        raise ReplayDiverged(message)

    def replay(self, key: str) -> bool:
        """Hand ``key``'s pending the answers an earlier start got; False if there are none."""
        answers = self.recovered.pop(key, None) if self.recovered else None
        if not answers:
            return False
        for message in answers:
            self.on_message(message)
        return True

    def replayed_mail(self, key: str, mail_id: str) -> Mail:
        mail = self.mails.get(mail_id)
        if mail is None:
            self.diverge(key, f"a call handed mail {mail_id}", "(that mail is no longer stored)")
        assert mail is not None
        return mail

    def pending(self, key: str) -> Pending:
        pending = Pending(key)
        self.pendings[key] = pending
        return pending

    def unread_mail(self) -> tuple[str, ...]:
        return tuple(m.mail_id for m in self.inbox) if self.inbox else ()

    def only_records(self, message: Any) -> bool:
        """Whether ``message`` would only be recorded: a foreground spawn's reply, or the
        outcome of a child the function awaits in a ``gather`` whose other parts some are
        still unresolved (the function does not resume). Anything else may resume it."""
        if self.ended:
            return True
        match message:
            case SpawnReply(request_id=rid, error=None):
                return not self.background.get(rid)
            case ChildDone(request_id=rid):
                awaiting, part = self.awaiting, self.pendings.get(rid)
                return (
                    isinstance(awaiting, PendingAll)
                    and part is not None
                    and awaiting.stays_open_without(part)
                )
        return False

    def start(
        self, checkpoint: Any, pending_mail: tuple[Mail, ...], recovered: tuple[Any, ...] = ()
    ) -> None:
        """Call the function. After a crash or a restart it runs again from the top, and its
        calls are matched, in order, to its journal and to what the earlier start already did
        (``recovered``): nothing is done twice, and every call is handed what it was before."""
        if recovered or pending_mail:  # (most runs start with neither)
            self._recover(recovered, pending_mail)
        ctx = AgentContext(self)
        if checkpoint is not None:  # what it goes on with (a continued run's conversation)
            ctx.history = tuple(checkpoint.messages)
        try:
            if self.is_async:
                value = self.fn(ctx)
            else:  # a sync function runs to its end here, waiting as it goes (or not)
                about_to_block()  # (``blocking()``'s two calls, without its two frames)
                try:
                    value = self.fn(ctx)
                finally:
                    done_blocking()
        except ReplayDiverged:
            return
        except Exception:
            raise  # a crash: the actor fails the run (error kind ``crash``)
        except BaseException as exc:  # SystemExit...: the run fails at once
            self._raised(exc)
            return
        if isinstance(value, CoroutineType):
            self.coro = value
            self._advance(None, None)
        else:
            self._finish(value)

    def _recover(self, recovered: tuple[Any, ...], pending_mail: tuple[Mail, ...]) -> None:
        """What an earlier start did (its journal, the answers it got) and the mail waiting
        for this start, the mail the journal says was taken already left out."""
        taken: set[str] = set()
        self.recovered, self.journaled = {}, {}  # (this run's own: the class's are read-only)
        for message in recovered:
            if isinstance(message, Replay):
                self._load_journal(message)
                taken = set(self.mails)
            else:
                self.recovered.setdefault(message.request_id, []).append(message)
        unread = [m for m in pending_mail if m.mail_id not in taken]
        if len(unread) < len(pending_mail):  # taken, but its read receipt was lost
            self.port.mail_read(tuple(m.mail_id for m in pending_mail if m.mail_id in taken))
        _add_mail(self, unread)

    def _load_journal(self, replay: Replay) -> None:
        prefix = self.prefix
        for entry in replay.entries:
            key = entry.request_id
            if key.startswith(prefix) and key[len(prefix) :].isdigit():
                self.journaled.setdefault(key, []).append(entry)
        mine = self.port.record.run_id
        self.mails = {m.mail_id: m for m in replay.mails if m.sender != mine}
        self.sent = {m.request_id: m for m in replay.mails if m.sender == mine and m.request_id}
        self.agents = dict(replay.agents)

    def _finish(self, value: Any) -> None:
        if self.journaled:
            key = min(self.journaled, key=lambda k: int(k[len(self.prefix) :]))
            made = self.journaled[key][0]
            try:
                self.diverge(key, self.described(key, made), "nothing: it returned")
            except ReplayDiverged:
                return
        self.ended = True
        if value is None:
            self.port.finish("", typed=True)
            return
        if isinstance(value, str):
            problem = None if value.isascii() else encoding_problem("its text", value)
            if problem is None:
                self.port.finish(value)
            else:
                self.port.fail(BAD_RESULT, f"{_returned(value)}, which cannot be kept: {problem}")
            return
        problem = value_problem("it", value)  # before msgspec: deep nesting, surrogates
        if problem is not None:
            self.port.fail(BAD_RESULT, f"{_returned(value)}, which cannot be kept: {problem}")
            return
        try:
            text = _encoder.encode(value).decode()
        except (TypeError, ValueError, RecursionError, msgspec.EncodeError) as exc:
            self.port.fail(
                BAD_RESULT,
                f"{_returned(value)}, which cannot be encoded ({exc}); return text, a number,"
                " a bool, None, a list, a dict, a msgspec Struct or a dataclass",
            )
            return
        self.port.finish(text, typed=True)

    def _raised(self, exc: BaseException) -> None:
        """The function raised ``SystemExit`` (or another ``BaseException`` that is not an
        ``Exception``): its run fails now, naming it (behaviour/failures.py)."""
        self.ended = True
        self.port.log.error("function raised", error=shown_repr(exc))
        self.port.fail(BASE_EXCEPTION, raised(f"function agent {self.port.record.agent}", exc))

    def _advance(self, value: Any, error: BaseException | None) -> None:
        assert self.coro is not None
        while True:
            try:
                yielded = self.coro.throw(error) if error is not None else self.coro.send(value)
            except StopIteration as stop:
                self._finish(stop.value)
                return
            except ReplayDiverged:
                return  # the run has failed already
            except Exception as exc:
                why = bad_await(exc)
                if why is None:
                    raise  # a crash: the actor fails the run (error kind ``crash``)
                self.ended = True  # a misuse, named: no traceback to read
                self.port.log.warning("function awaited what it may not", error=shown_repr(exc))
                self.port.fail("crash", f"function agent {self.port.record.agent}: {why}")
                return
            except BaseException as exc:  # SystemExit...: fails at once
                self._raised(exc)
                return
            if self.ended:  # a diverged replay caught by the function: it has failed
                self.coro.close()
                return
            if type(yielded) is not Pending and not isinstance(yielded, Pending):
                error = BadAwait(f"it awaited {yielded!r}; {NO_EVENT_LOOP}")
                value = None
                continue
            if yielded.resolved:
                value, error = yielded.value, yielded.error
                continue
            self.awaiting = yielded
            if not self.told_waiting and yielded.key not in self.brief_sleeps:
                self.told_waiting = True
                self.port.set_waiting(True)
            return

    def on_message(self, message: Any) -> None:
        if self.ended:
            return
        match message:
            case DeliverMail(mails=mails):  # the most frequent first: cases are tried in order
                _add_mail(self, mails)
                self.hand_out()
            case MailAck(request_id=rid, mail_id=mail_id, error=error):
                if error is not None:
                    self._seen(rid, error=error)
                    self.resolve(rid, error=MailError(error))
                else:
                    self.resolve(rid, mail_id)
            case SpawnReply(request_id=rid, run_id=run_id, error=error):
                if error is not None:
                    self._seen(rid, error=error)
                    self.resolve(rid, error=SpawnRefused(error))
                elif self.background.get(rid):
                    self.resolve(rid, run_id)
            case ChildDone(request_id=rid, outcome=outcome):
                self.resolve(rid, outcome)
            case StopReply(request_id=rid, stopped=stopped, error=error):
                if error is not None:
                    self.resolve(rid, error=StopError(error))
                else:
                    self.resolve(rid, list(stopped))
            case Wake(key=key):
                sleeper = self.sleepers.pop(key, None)
                if sleeper is not None:
                    if key in self.brief_sleeps:
                        self.brief_sleeps = self.brief_sleeps - {key}
                    self._seen(key)
                    self.resolve(key, None)
                    return
                for receiver in self.receivers[:]:
                    if receiver.key == key:
                        self.receivers.remove(receiver)
                        if key == self.unjournaled:  # this entry says the call too
                            self.unjournaled = None
                        self._seen(key, kind="receive", result=None)
                        self.resolve(key, None)
            case Continue():
                pass
            case _:
                self.port.log.warning("unexpected message", message=type(message).__name__)

    def _seen(
        self, key: str, *, kind: str = "", result: Any = None, error: str | None = None
    ) -> None:
        """Journal what a call was handed, before the function can see it (``kind``: the
        call's, when the entry may be the call's only one: ``unjournaled``)."""
        if key in self.pendings:
            self.port.journal(
                JournalEntry(request_id=key, kind=kind, observed=True, result=result, error=error)
            )

    def hand_out(self) -> None:
        """Mail arrived: answer the ``receive`` calls waiting for it, in order."""
        while self.receivers and self.inbox:
            receiver = self.receivers.pop(0)
            if receiver.key == self.unjournaled:  # the entry below says the call too
                self.unjournaled = None
            self.port.cancel_wake(receiver.key)
            mail = self.inbox.popleft()
            self.port.journal(
                JournalEntry(
                    request_id=receiver.key, kind="receive", observed=True, result=mail.mail_id
                ),
                (mail.mail_id,),
            )
            self.resolve(receiver.key, mail)

    def resolve(self, key: str, value: Any = None, error: BaseException | None = None) -> None:
        pending = self.pendings.pop(key, None)
        if pending is None:
            return
        if not pending.resolved:  # (``Pending.resolve``, without its frame: twice a mail)
            pending.value, pending.error, pending.resolved = value, error, True
        if self.groups:  # (most calls are awaited alone)
            for group in self.groups:  # (in the order made: a group before one holding it)
                group.refresh()
            self.groups = tuple([group for group in self.groups if not group.resolved])
        awaiting = self.awaiting
        if awaiting is not None and awaiting.resolved and self.coro is not None:
            self.awaiting = None
            self._advance(awaiting.value, awaiting.error)


__all__ = [
    "NONDETERMINISTIC",
    "AgentContext",
    "FunctionAgent",
    "FunctionBehaviour",
    "MailError",
    "Pending",
    "PendingAll",
    "PendingAny",
    "ReplayDiverged",
    "SpawnRefused",
    "StopError",
]
