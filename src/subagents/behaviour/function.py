"""Function agents: a Python callable as an agent, with the same limits, events and reports.

``def fn(ctx) -> result`` runs to completion on the agent's thread. ``async def fn(ctx)`` can
also wait: it awaits ``ctx.spawn(...)``, ``ctx.receive()``, ``ctx.send(...)``,
``ctx.stop(...)``, ``ctx.stop_children()``, ``ctx.sleep(...)``, ``ctx.gather(...)``,
``ctx.wait_any(...)``. The coroutine is driven by the
agent's actor without asyncio: each ``await`` on a context operation hands the actor a
``Pending``; the actor goes back to its mailbox and resumes the coroutine when the answer
arrives, so waiting on a child never blocks a thread.

Exact replay. Every context call is journaled (``JournalEntry``, through the supervisor, the
store's one writer): the call when it is made, and what the function was handed when that is
not already in another record (the mail a ``receive`` took, a timeout, the mail a
``mailbox()`` read took, a stop's answer, an error). After a crash (or a restart) the
function runs again from the top, and each call is matched, by its position, to the journal:
a call already made is not made again, it is handed what it was handed before (a child's
outcome from the child's record, the same mail, the same timeout...), and a call at a
position where the earlier start did something else fails the run with a "non-deterministic
replay" error instead of doing things twice. Past the end of the journal, calls are live.

Why that is exact even if the process dies at any instant: journal entries reach the
supervisor ahead of every report the function made after them (``AgentPort.journal``), the
supervisor writes them in that order, and nothing the function did after seeing a result is
made durable, or visible to another run, before the transaction holding that result's entry
is committed. So a crash keeps a prefix of what the function did, its journal included, and
a result the crash lost was seen by nothing that survived it.
"""

from __future__ import annotations

import inspect
import itertools
import math
import time
import zlib
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from subagents.behaviour.failures import (
    BASE_EXCEPTION,
    NO_EVENT_LOOP,
    BadAwait,
    bad_await,
    raised,
)
from subagents.behaviour.port import AgentPort
from subagents.blocking import about_to_block
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    ChatMessage,
    ChildDone,
    Continue,
    DeliverMail,
    JournalEntry,
    Mail,
    MailAck,
    Outcome,
    Replay,
    SendMail,
    SpawnReply,
    SpawnRequest,
    StopReply,
    StopRequest,
    StopRequested,
    Wake,
)
from subagents.supervision.requests import encoding_problem, value_problem
from subagents.supervision.synthesis import Item, Synthesis, outcome_value, synthesize


class SpawnRefused(Exception):
    """The supervisor refused a spawn: unknown agent, a spawn rule, the depth limit or the
    queue bound; the message names which (concurrency limits never refuse: they queue)."""


class MailError(Exception):
    """Mail could not be sent (unknown or ambiguous recipient, dead letter...)."""


class StopError(Exception):
    """A stop was refused (not a descendant, already ended...)."""


class ReplayDiverged(Exception):
    """A resumed function agent made another call than its earlier start at the same position.

    The run has already failed (error kind ``nondeterministic_replay``) when this is raised;
    catching it changes nothing."""


NONDETERMINISTIC = "nondeterministic_replay"
"""The error kind of a run whose replay diverged from its journal."""

BAD_RESULT = "bad_result"
"""The error kind of a run whose returned value cannot be encoded (or is too large)."""

_UNSET: Any = object()

_SPAWN_POLICIES = frozenset(
    {
        "token_budget",
        "cost_budget_usd",
        "on_failure",
        "max_retries",
        "share",
        "inherit_messages",
        "cleanup",
        "continues",
    }
)

_encoder = msgspec.json.Encoder()


def _digest(*parts: Any) -> int:
    """A fingerprint of a call's arguments, the same in every process (``hash`` is not).
    Kept cheap: it is taken for every call, and a mail stream makes one call per mail."""
    return zlib.crc32("\x00".join(map(str, parts)).encode("utf-8", "surrogatepass"))


def _shown(kind: str, args: tuple[Any, ...]) -> str:
    """A call as the error of a diverged replay shows it: ``spawn('worker', 'the task')``."""
    parts = []
    for arg in args:
        text = repr(arg)
        parts.append(text if len(text) <= 40 else text[:37] + "...")
    return f"{kind}({', '.join(parts)})"


_CONSTANT_CALLS = {
    "receive": "receive()",
    "mailbox": "mailbox()",
    "sleep": "sleep(...)",
    "gather": "gather(...)",
    "wait_any": "wait_any(...)",
    "stop_children": "stop_children()",
}


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
        them makes a gather of n parts O(n) in all, not O(n^2)."""
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


class PendingAny(Pending):
    """Resolved when one part is: ``(position, value)`` of the first answered (its error
    raised). ``first``: the position a replayed journal says won, waited for whatever
    resolves before it; otherwise the winner is journaled before the function sees it."""

    def __init__(
        self, key: str, parts: tuple[Pending, ...], first: int | None, b: FunctionBehaviour
    ) -> None:
        super().__init__(key)
        self.parts = parts
        self.first = first
        self._b = b
        self.refresh()

    def refresh(self) -> None:
        if self.resolved:
            return
        if self.first is not None:
            if not 0 <= self.first < len(self.parts):
                self.resolve(error=IndexError(f"wait_any(): no call at {self.first}"))
                return
            candidates: list[tuple[int, Pending]] = [(self.first, self.parts[self.first])]
        else:
            candidates = list(enumerate(self.parts))
        for index, part in candidates:
            if part.resolved:
                if self.first is None:
                    self._b.port.journal(
                        JournalEntry(request_id=self.key, observed=True, result=index)
                    )
                if part.error is not None:
                    self.resolve(error=part.error)
                else:
                    self.resolve((index, part.value))
                return


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


def _seen(replayed: list[JournalEntry] | None) -> JournalEntry | None:
    """The result entry an earlier start wrote for a call, if it got that far."""
    if replayed is None:
        return None
    return next((e for e in replayed if e.observed), None)


def _answered_stop(b: FunctionBehaviour, key: str, replayed: list[JournalEntry] | None) -> bool:
    """Resolve a replayed stop from the answer the supervisor journaled with the stop itself
    (the ids stopped, or its error); False when the stop was never answered."""
    seen = _seen(replayed)
    if seen is None:
        return False
    if seen.error is not None:
        b.resolve(key, error=StopError(seen.error))
    else:
        stopped = seen.result if isinstance(seen.result, list) else []
        b.resolve(key, [str(r) for r in stopped])
    return True


class AgentContext:
    """What a function agent can do: spawn, mail, stop, sleep, and read about its run."""

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
        self.continues = record.continues
        """The ended run this one continues (``continue_run``), else None."""
        self.history: tuple[ChatMessage, ...] = ()
        """The conversation this run starts with: a continued run's (the earlier task, its
        result, then ``task``), or its parent's (``inherit_messages``); else empty."""

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
        ``share`` (shared-context keys to copy), ``inherit_messages`` (docs/supervision.md),
        ``cleanup`` (``keep``/``delete``: what the sweeper does with the child's run).
        """
        unknown = set(policies) - _SPAWN_POLICIES
        if unknown:
            raise TypeError(f"spawn() got unknown options: {', '.join(sorted(unknown))}")
        if "share" in policies:
            share = policies["share"]
            policies["share"] = (share,) if isinstance(share, str) else tuple(share)
        b = self._b
        digest = _digest(agent, task, context, background)
        key, replayed = b.call("spawn", digest, agent, task)
        pending = b.pending(key)
        b.background[key] = background
        request = SpawnRequest(
            request_id=key,
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
        seen = _seen(replayed)
        if seen is not None and seen.error is not None:
            b.resolve(key, error=SpawnRefused(seen.error))
            return pending
        if replayed is None:
            b.port.journal(
                JournalEntry(
                    request_id=key,
                    kind="spawn",
                    call=_shown("spawn", (agent, task)),
                    digest=digest,
                )
            )
        if not b.replay(key):  # else: spawned by the earlier start, its answers replayed
            b.port.request_spawn(request)
            b.unheld()
        return pending

    def continue_run(self, run_id: str, text: str, **options: Any) -> Pending:
        """A child going on with the ended run ``run_id`` of this tree: its conversation, then
        ``text`` (docs/runtime.md "Continuing a run"); ``options``: ``spawn``'s. Awaiting
        gives its Outcome (a refusal raises ``SpawnRefused``)."""
        return self.spawn("", text, continues=run_id, **options)

    def send(self, to: str, content: str, reply_to: str | None = None) -> Pending:
        """Send mail to a run id or an agent name of this tree. Awaiting gives the mail id."""
        b = self._b
        key, replayed = b.call("send", 0, to, content)
        pending = b.pending(key)
        port = b.port
        if replayed is None:
            # The hot path of a mail stream: the entry says only "a send" (no digest, no
            # text). A replay checks its arguments against the mail's own record instead.
            port.journal(JournalEntry(request_id=key, kind="send"))
        else:
            sent = b.sent.get(key)
            if sent is not None and not b.same_mail(sent, to, content, reply_to):
                b.diverge(key, b.described(key, replayed[0]), _shown("send", (to, content)))
            seen = _seen(replayed)
            if seen is not None and seen.error is not None:
                b.resolve(key, error=MailError(seen.error))
                return pending
        if b.recovered and b.replay(key):  # sent by the earlier start: not sent twice
            return pending
        port.send_mail(
            SendMail(
                request_id=key,
                sender=self.run_id,
                to=to,
                content=content,
                reply_to=reply_to,
            )
        )
        b.unheld()
        return pending

    def receive(self, timeout: float = 30.0) -> Pending:
        """Awaiting gives the next unread Mail, or None when ``timeout`` passes first."""
        b = self._b
        key, replayed = b.call("receive", 0)
        pending = b.pending(key)
        if replayed is not None:
            seen = _seen(replayed)
            if seen is not None:  # the same mail (or the same timeout) as before
                if seen.result is None:
                    b.resolve(key, None)
                else:
                    b.resolve(key, b.replayed_mail(key, str(seen.result)))
                return pending
        elif b.inbox:
            mail = b.inbox.popleft()
            b.port.journal(
                JournalEntry(request_id=key, kind="receive", observed=True, result=mail.mail_id),
                (mail.mail_id,),
            )
            b.resolve(key, mail)
            return pending
        else:
            b.port.journal(JournalEntry(request_id=key, kind="receive"))
        b.receivers.append(pending)
        b.port.wake_after(key, max(0.0, _seconds("receive", "timeout", timeout)))
        if b.inbox:  # a replayed receive that was waiting: mail may be here already
            b.hand_out()
        return pending

    def mailbox(self) -> list[Mail]:
        """Every unread mail, now, without waiting."""
        b = self._b
        key, replayed = b.call("mailbox", 0)
        seen = _seen(replayed)
        if seen is not None:
            ids = seen.result if isinstance(seen.result, list) else []
            return [b.replayed_mail(key, str(mail_id)) for mail_id in ids]
        taken, b.inbox = list(b.inbox), deque()
        ids = [m.mail_id for m in taken]
        b.port.journal(
            JournalEntry(request_id=key, kind="mailbox", observed=True, result=ids), tuple(ids)
        )
        return taken

    def stop(self, run_id: str) -> Pending:
        """Stop one of this run's descendants. Awaiting gives the ids stopped."""
        b = self._b
        key, replayed = b.call("stop", _digest(run_id), run_id)
        pending = b.pending(key)
        if _answered_stop(b, key, replayed):
            return pending
        if replayed is None:
            b.port.journal(
                JournalEntry(
                    request_id=key,
                    kind="stop",
                    call=_shown("stop", (run_id,)),
                    digest=_digest(run_id),
                )
            )
        b.port.request_stop(
            StopRequest(
                request_id=key,
                run_id=run_id,
                requester=self.run_id,
                reason=f"stopped by {self.agent} ({self.run_id})",
                journal=True,
            )
        )
        b.unheld()
        return pending

    def stop_children(self, reason: str | None = None) -> Pending:
        """Stop every live run this run requested (its children, each with its subtree),
        with one reason, in one decision. Awaiting gives the ids stopped (none when no child
        is live). Journaled like ``stop``: a replay gets the same answer."""
        b = self._b
        key, replayed = b.call("stop_children", 0)
        pending = b.pending(key)
        if _answered_stop(b, key, replayed):
            return pending
        if replayed is None:
            b.port.journal(JournalEntry(request_id=key, kind="stop_children"))
        b.port.request_stop(
            StopRequested(
                request_id=key,
                requested_by=self.run_id,
                requester=self.run_id,
                reason=reason or f"stopped by {self.agent} ({self.run_id})",
                journal=True,
            )
        )
        b.unheld()
        return pending

    def wait_any(self, *pendings: Pending) -> Pending:
        """Await the first of several operations to be answered (the first child to end,
        the first mail...): its position among ``pendings`` and its value, ``(i, value)``
        (its error raised). Journaled: a replay is handed the same one, whatever order the
        answers come back in then. The others go on; await them later, or stop them."""
        for part in pendings:
            if not isinstance(part, Pending):
                raise TypeError(
                    f"wait_any() takes ctx operations (spawn, send, receive...), not {part!r}"
                )
        if not pendings:
            raise ValueError("wait_any() needs at least one ctx operation")
        b = self._b
        digest = _digest(*(p.key for p in pendings))
        key, replayed = b.call("wait_any", digest, f"{len(pendings)} calls")
        first: int | None = None
        seen = _seen(replayed)
        if seen is not None and isinstance(seen.result, int):
            first = seen.result
        elif replayed is None:
            b.port.journal(JournalEntry(request_id=key, kind="wait_any", digest=digest))
        group = PendingAny(key, tuple(pendings), first, b)
        if not group.resolved:
            b.groups.append(group)
        return group

    def synthesize(
        self,
        outcomes: Sequence[Outcome],
        strategy: str = "vote",
        *,
        threshold: float = 0.5,
        scorer: Callable[[Any], float] | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> Synthesis:
        """Combine the outcomes of children this run already has (from ``spawn`` or
        ``gather``) by ``strategy``, as ``Runtime.synthesize`` does for runs: merge, vote,
        consensus, best_pick, weighted_average (``weights`` by agent), chain, collect. Pure:
        nothing is journaled, the same outcomes give the same synthesis."""
        items = [_outcome_item(o, dict(weights or {})) for o in outcomes]
        return synthesize(strategy, items, threshold=threshold, scorer=scorer, weights=weights)

    def sleep(self, seconds: float) -> Pending:
        """Awaiting returns after ``seconds`` (without holding a thread). After a crash, a
        sleep that had ended is not slept again; one that had not sleeps what is left."""
        seconds = max(0.0, _seconds("sleep", "seconds", seconds))
        b = self._b
        key, replayed = b.call("sleep", 0)
        pending = b.pending(key)
        if replayed is None:
            until = time.time() + seconds
            b.port.journal(JournalEntry(request_id=key, kind="sleep", result=until))
        elif _seen(replayed) is not None:
            b.resolve(key, None)
            return pending
        else:
            made = replayed[0].result
            until = float(made) if isinstance(made, int | float) else time.time()
        b.sleepers[key] = pending
        b.port.wake_after(key, max(0.0, until - time.time()))
        return pending

    def gather(self, *pendings: Pending) -> Pending:
        """Await several operations together; values in order (first error raised)."""
        for part in pendings:
            if not isinstance(part, Pending):
                raise TypeError(
                    f"gather() takes ctx operations (spawn, send, receive...), not {part!r}"
                )
        b = self._b
        digest = _digest(*(p.key for p in pendings))
        key, replayed = b.call("gather", digest, f"{len(pendings)} calls")
        if replayed is None:
            b.port.journal(JournalEntry(request_id=key, kind="gather", digest=digest))
        group = PendingAll(key, tuple(pendings))
        b.groups.append(group)
        return group


def _outcome_item(outcome: Outcome, weights: Mapping[str, float]) -> Item:
    """A child's outcome as a synthesis input (its agent is not in an Outcome: weights by
    agent apply to what ``Outcome`` cannot name, so they are keyed by run id here too)."""
    return Item(
        source=outcome.run_id,
        weight=float(weights.get(outcome.run_id, 1.0)),
        value=outcome_value(outcome.result, outcome.typed) if outcome.ok else None,
        ok=outcome.ok,
        error=None if outcome.ok else f"{outcome.status}: {outcome.error}",
    )


def _returned(value: Any) -> str:
    """``the function returned a builtins.list``: the start of a ``bad_result`` error."""
    return f"the function returned a {type(value).__module__}.{type(value).__qualname__}"


def _seconds(call: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TypeError(f"{call}(): {name} must be a number of seconds, got {value!r}")
    return float(value)


class FunctionBehaviour:
    """Runs a callable; drives it as a coroutine when it is ``async``."""

    def __init__(self, fn: Callable[..., Any], port: AgentPort) -> None:
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        self.port = port
        record = port.record
        self.prefix = (
            f"{record.run_id}:" if not record.retries else f"{record.run_id}:{record.retries}."
        )
        """Keys of this generation's calls (a retry starts anew: its keys differ)."""
        self.pendings: dict[str, Pending] = {}
        self.recovered: dict[str, list[Any]] = {}
        self.journaled: dict[str, list[JournalEntry]] = {}
        """The journal of the earlier starts, by call key, not replayed yet."""
        self.mails: dict[str, Mail] = {}
        """The mail the journal says was taken, by id."""
        self.sent: dict[str, Mail] = {}
        """The mail the earlier starts sent, by call key (what a replayed send is checked
        against, and what a diverged replay's error shows)."""
        self.agents: dict[str, str] = {}
        """The agent of each run of the tree, by run id (a send may name its recipient so)."""
        self.groups: list[PendingAll | PendingAny] = []
        self.background: dict[str, bool] = {}
        self.receivers: deque[Pending] = deque()
        self.sleepers: dict[str, Pending] = {}
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
        self._positions = itertools.count()

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
        key = self.prefix + str(next(self._positions))
        if not self.journaled:  # the common case: live
            return key, None
        replayed = self.journaled.pop(key, None)
        if replayed is None:  # the journal goes on, yet has nothing for this position
            self.diverge(key, "a call the journal has no record of", _shown(kind, shown))
        elif replayed[0].kind != kind or replayed[0].digest != digest:
            self.diverge(key, self.described(key, replayed[0]), _shown(kind, shown))
        return key, replayed

    def described(self, key: str, made: JournalEntry) -> str:
        """The call an earlier start made, for an error: its text, or its mail's record."""
        if made.call:
            return made.call
        mail = self.sent.get(key)
        if made.kind == "send" and mail is not None:
            return _shown("send", (mail.recipient, mail.content))
        return _CONSTANT_CALLS.get(made.kind, f"{made.kind or 'something else'}(...)")

    def same_mail(self, mail: Mail, to: str, content: str, reply_to: str | None) -> bool:
        """Whether a replayed send is the one that made ``mail`` (its recipient by run id or
        by agent name, its content, its reply_to)."""
        return (
            mail.content == content
            and mail.reply_to == reply_to
            and to in (mail.recipient, self.agents.get(mail.recipient))
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
        answers = self.recovered.pop(key, None)
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
        return tuple(m.mail_id for m in self.inbox)

    def start(
        self, checkpoint: Any, pending_mail: tuple[Mail, ...], recovered: tuple[Any, ...] = ()
    ) -> None:
        """Call the function. After a crash or a restart it runs again from the top, and its
        calls are matched, in order, to its journal and to what the earlier start already did
        (``recovered``): nothing is done twice, and every call is handed what it was before."""
        taken: set[str] = set()
        for message in recovered:
            if isinstance(message, Replay):
                self._load_journal(message)
                taken = set(self.mails)
            else:
                self.recovered.setdefault(message.request_id, []).append(message)
        unread = [m for m in pending_mail if m.mail_id not in taken]
        if len(unread) < len(pending_mail):  # taken, but its read receipt was lost
            self.port.mail_read(tuple(m.mail_id for m in pending_mail if m.mail_id in taken))
        self.inbox.extend(unread)
        if not self.is_async:
            about_to_block()  # a sync function runs to its end here, waiting as it goes
        ctx = AgentContext(self)
        if checkpoint is not None:  # what it goes on with (a continued run's conversation)
            ctx.history = tuple(checkpoint.messages)
        try:
            value = self.fn(ctx)
        except ReplayDiverged:
            return
        except Exception:
            raise  # a crash: the actor fails the run (error kind ``crash``)
        except BaseException as exc:  # SystemExit...: the run fails at once
            self._raised(exc)
            return
        if inspect.iscoroutine(value):
            self.coro = value
            self._advance(None, None)
        else:
            self._finish(value)

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
            problem = encoding_problem("its text", value)
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
        self.port.log.error("function raised", error=repr(exc))
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
                self.port.log.warning("function awaited what it may not", error=repr(exc))
                self.port.fail("crash", f"function agent {self.port.record.agent}: {why}")
                return
            except BaseException as exc:  # SystemExit...: fails at once
                self._raised(exc)
                return
            if self.ended:  # a diverged replay caught by the function: it has failed
                self.coro.close()
                return
            if not isinstance(yielded, Pending):
                error = BadAwait(f"it awaited {yielded!r}; {NO_EVENT_LOOP}")
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
            case DeliverMail(mails=mails):  # the most frequent first: cases are tried in order
                self.inbox.extend(mails)
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
                    self._seen(key)
                    self.resolve(key, None)
                    return
                for receiver in list(self.receivers):
                    if receiver.key == key:
                        self.receivers.remove(receiver)
                        self._seen(key, result=None)
                        self.resolve(key, None)
            case Continue():
                pass
            case _:
                self.port.log.warning("unexpected message", message=type(message).__name__)

    def _seen(self, key: str, *, result: Any = None, error: str | None = None) -> None:
        """Journal what a call was handed, before the function can see it."""
        if key in self.pendings:
            self.port.journal(
                JournalEntry(request_id=key, observed=True, result=result, error=error)
            )

    def hand_out(self) -> None:
        """Mail arrived: answer the ``receive`` calls waiting for it, in order."""
        while self.receivers and self.inbox:
            receiver = self.receivers.popleft()
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
    "NONDETERMINISTIC",
    "AgentContext",
    "FunctionAgent",
    "FunctionBehaviour",
    "MailError",
    "Pending",
    "ReplayDiverged",
    "SpawnRefused",
    "StopError",
]
