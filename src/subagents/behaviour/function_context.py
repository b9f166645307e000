"""``AgentContext``: what a function agent can do (spawn, mail, stop, sleep, gather, read
about its run), each call journaled so a restarted function is handed what it was before.

Why apart from the behaviour (``behaviour.function.FunctionBehaviour``): this is the API a
function agent's author reads; the behaviour is what drives the function and replays its
journal. The context asks the behaviour only through ``ContextHost``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from subagents.behaviour.awaitables import Pending, PendingAll, PendingAny
from subagents.behaviour.function_replay import call_digest, seen_result, shown_call
from subagents.behaviour.port import AgentPort
from subagents.messages import (
    ChatMessage,
    JournalEntry,
    Mail,
    Outcome,
    RunProgress,
    SendMail,
    SpawnRequest,
    StopRequest,
    StopRequested,
    Subscribe,
    topic_problem,
)
from subagents.supervision.parking import BRIEF_SLEEP_FLOOR_S
from subagents.supervision.requests import option_type_problem, refuse_unkeepable_id
from subagents.supervision.synthesis import Item, Synthesis, outcome_value, synthesize


class SpawnRefused(Exception):
    """The supervisor refused a spawn: unknown agent, a spawn rule, the depth limit or the
    queue bound; the message names which (concurrency limits never refuse: they queue)."""


class MailError(Exception):
    """Mail could not be sent (unknown or ambiguous recipient, dead letter...)."""


class StopError(Exception):
    """A stop was refused (not a descendant, already ended...)."""


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


class ContextHost(Protocol):
    """What the context asks of the behaviour that runs its function (``FunctionBehaviour``):
    its port, its calls' journal and pendings, its mail. A protocol, so that the context does
    not import the behaviour that creates it (tests/test_import_graph.py)."""

    port: AgentPort
    coro: Coroutine[Any, Any, Any] | None
    pendings: dict[str, Pending]
    background: dict[str, bool]
    groups: tuple[PendingAll | PendingAny, ...]
    inbox: deque[Mail] | tuple[()]
    receivers: list[Pending]
    unjournaled: str | None
    recovered: dict[str, list[Any]]
    sent: Mapping[str, Mail]
    sleepers: dict[str, Pending]
    brief_sleeps: frozenset[str]
    brief_sleep_left: float

    def call(
        self, kind: str, digest: int, *shown: Any
    ) -> tuple[str, list[JournalEntry] | None]: ...
    def described(self, key: str, made: JournalEntry) -> str: ...
    def diverge(self, key: str, before: str, now: str) -> None: ...
    def hand_out(self) -> None: ...
    def pending(self, key: str) -> Pending: ...
    def replay(self, key: str) -> bool: ...
    def replayed_mail(self, key: str, mail_id: str) -> Mail: ...
    def resolve(self, key: str, value: Any = None, error: BaseException | None = None) -> None: ...
    def same_mail(self, mail: Mail, to: str, content: str, reply_to: str | None) -> bool: ...
    def unheld(self) -> None: ...


def _answered_stop(b: ContextHost, key: str, replayed: list[JournalEntry] | None) -> bool:
    """Resolve a replayed stop from the answer the supervisor journaled with the stop itself
    (the ids stopped, or its error); False when the stop was never answered."""
    seen = seen_result(replayed)
    if seen is None:
        return False
    if seen.error is not None:
        b.resolve(key, error=StopError(seen.error))
    else:
        stopped = seen.result if isinstance(seen.result, list) else []
        b.resolve(key, [str(r) for r in stopped])
    return True


def _share_as_keys(policies: dict[str, Any]) -> None:
    """``spawn``'s ``share`` (a key name, or several) as the request's tuple of keys; a
    value of another type is left for the request's type check to name."""
    share = policies.get("share")
    if share is None:  # (not given)
        policies.pop("share", None)
    elif isinstance(share, str | list | tuple | set | frozenset):
        policies["share"] = (share,) if isinstance(share, str) else tuple(share)


class AgentContext:
    """What a function agent can do: spawn, mail, stop, sleep, and read about its run."""

    def __init__(self, behaviour: ContextHost) -> None:
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
        detach: bool = False,
        **policies: Any,
    ) -> Pending:
        """Start a child now. Awaiting gives its Outcome (background: its run id).
        ``detach``: the child outlives this run (and is a background child: docs/runtime.md,
        "Children that outlive their parent").

        ``policies``: ``token_budget``, ``cost_budget_usd``, ``on_failure``, ``max_retries``,
        ``share`` (shared-context keys to copy), ``inherit_messages`` (docs/supervision.md),
        ``cleanup`` (``keep``/``delete``: what the sweeper does with the child's run).
        """
        unknown = set(policies) - _SPAWN_POLICIES
        if unknown:
            raise TypeError(f"spawn() got unknown options: {', '.join(sorted(unknown))}")
        _share_as_keys(policies)
        background = background or detach
        request = SpawnRequest(
            request_id="",
            agent=agent,
            task=task,
            parent_run_id=self.run_id,
            context=context,
            background=background,
            detach=detach,
            timeout=timeout,
            model=model,
            label=label,
            **policies,
        )
        problem = option_type_problem(request)  # the call is wrong: rt.spawn's TypeError,
        if problem is not None:  # before anything is journaled (a replay raises the same)
            raise TypeError(problem)
        b = self._b
        # (a detached spawn's fingerprint differs; a plain one's is what it always was)
        digest = call_digest(agent, task, context, background, *(("detach",) if detach else ()))
        key, replayed = b.call("spawn", digest, agent, task)
        pending = b.pending(key)
        b.background[key] = background
        request = msgspec.structs.replace(request, request_id=key)
        seen = seen_result(replayed)
        if seen is not None and seen.error is not None:
            b.resolve(key, error=SpawnRefused(seen.error))
            return pending
        if replayed is None:
            b.port.journal(
                JournalEntry(
                    request_id=key,
                    kind="spawn",
                    call=shown_call("spawn", (agent, task)),
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
        """Send mail to a run id or an agent name of this tree, or to ``topic:NAME`` (each
        subscriber of this tree). Awaiting gives the mail id (a topic's: the first mail's,
        None when nobody is subscribed). ``TypeError`` at once for a ``to``, ``content`` or
        ``reply_to`` of the wrong type (the call is wrong, as ``spawn``'s): told only to an
        ``await``, a send not awaited was lost without a word."""
        if type(to) is not str or type(content) is not str or reply_to is not None:
            _check_send_types(to, content, reply_to)  # (``type``: no call, a mail's hot path)
        b = self._b
        key, replayed = b.call("send", 0, to, content)
        pending = b.pendings[key] = Pending(key)  # (``pending``, without its frame)
        port = b.port
        if replayed is None:
            # The hot path of a mail stream: the entry says only "a send" (no digest, no
            # text). A replay checks its arguments against the mail's own record instead.
            port.journal(JournalEntry(request_id=key, kind="send"))
        else:
            sent = b.sent.get(key)
            if sent is not None and not b.same_mail(sent, to, content, reply_to):
                b.diverge(key, b.described(key, replayed[0]), shown_call("send", (to, content)))
            seen = seen_result(replayed)
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
        if b.coro is None:  # (``unheld``, without its frame: a mail stream's every send)
            port.flush_reports()
        return pending

    def receive(self, timeout: float = 30.0) -> Pending:
        """Awaiting gives the next unread Mail, or None when ``timeout`` passes first."""
        b = self._b
        key, replayed = b.call("receive", 0)
        pending = b.pendings[key] = Pending(key)  # (``pending``, without its frame)
        if replayed is not None:
            seen = seen_result(replayed)
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
        else:  # it waits: its entry is put off (``FunctionBehaviour.unjournaled``)
            b.unjournaled = key
        b.receivers.append(pending)
        if type(timeout) is not float or not timeout >= 0.0:  # (most: a float; no frame then)
            timeout = max(0.0, _seconds("receive", "timeout", timeout))
        b.port.wake_after(key, timeout)
        if b.inbox:  # a replayed receive that was waiting: mail may be here already
            b.hand_out()
        return pending

    def subscribe(self, topic: str) -> None:
        """Subscribe this run to ``topic`` of its tree: mail sent to ``topic:NAME`` from now
        on reaches it, until it unsubscribes or ends (docs/function-agents.md, "Topics").
        Not awaited; ``ValueError`` for a bad name. Saying it again changes nothing, so a
        replay after a crash says it again, unjournaled."""
        self._subscription(topic, subscribe=True)

    def unsubscribe(self, topic: str) -> None:
        """No more mail to ``topic:NAME`` for this run (nothing if it was not subscribed)."""
        self._subscription(topic, subscribe=False)

    def _subscription(self, topic: str, *, subscribe: bool) -> None:
        problem = topic_problem(topic)
        if problem is not None:
            raise ValueError(problem)
        b = self._b
        b.port.subscribe(Subscribe(run_id=self.run_id, topic=topic, subscribe=subscribe))
        b.unheld()

    def mailbox(self) -> list[Mail]:
        """Every unread mail, now, without waiting."""
        b = self._b
        key, replayed = b.call("mailbox", 0)
        seen = seen_result(replayed)
        if seen is not None:
            ids = seen.result if isinstance(seen.result, list) else []
            return [b.replayed_mail(key, str(mail_id)) for mail_id in ids]
        taken, b.inbox = list(b.inbox), ()
        ids = [m.mail_id for m in taken]
        b.port.journal(
            JournalEntry(request_id=key, kind="mailbox", observed=True, result=ids), tuple(ids)
        )
        return taken

    def status(self, run_id: str) -> RunProgress:
        """Where ``run_id`` (a run of this tree) is now, without waiting for it: its status,
        steps, last tool call, usage, unread mail, what its model is writing. ``ValueError``
        when there is no such run in this tree. Journaled with what it saw: a replay after a
        crash is handed the same answer."""
        refuse_unkeepable_id(run_id)
        b = self._b
        key, replayed = b.call("status", call_digest(run_id), run_id)
        seen = seen_result(replayed)
        if seen is not None:
            if seen.error is not None:
                raise ValueError(seen.error)
            return msgspec.convert(seen.result, RunProgress)
        made = JournalEntry(
            request_id=key,
            kind="status",
            call=shown_call("status", (run_id,)),
            digest=call_digest(run_id),
            observed=True,
        )
        try:
            progress = b.port.ask_status(run_id)
        except ValueError as exc:
            b.port.journal(msgspec.structs.replace(made, error=str(exc)))
            raise
        b.port.journal(msgspec.structs.replace(made, result=msgspec.to_builtins(progress)))
        return progress

    def stop(self, run_id: str) -> Pending:
        """Stop one of this run's descendants. Awaiting gives the ids stopped."""
        refuse_unkeepable_id(run_id)
        b = self._b
        key, replayed = b.call("stop", call_digest(run_id), run_id)
        pending = b.pending(key)
        if _answered_stop(b, key, replayed):
            return pending
        if replayed is None:
            b.port.journal(
                JournalEntry(
                    request_id=key,
                    kind="stop",
                    call=shown_call("stop", (run_id,)),
                    digest=call_digest(run_id),
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
        digest = call_digest(*(p.key for p in pendings))
        key, replayed = b.call("wait_any", digest, f"{len(pendings)} calls")
        first: int | None = None
        seen = seen_result(replayed)
        if seen is not None and isinstance(seen.result, int):
            first = seen.result
        elif replayed is None:
            b.port.journal(JournalEntry(request_id=key, kind="wait_any", digest=digest))
        group = PendingAny(key, tuple(pendings), first, b.port)
        if not group.resolved:
            b.groups = (*b.groups, group)
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
        sleep that had ended is not slept again; one that had not sleeps what is left. A
        sleep of at most ``BRIEF_SLEEP_S`` awaited alone keeps the run's slot (it is not
        waiting: docs/supervision.md, parking), until the run's brief sleeps add up to more."""
        seconds = max(0.0, _seconds("sleep", "seconds", seconds))
        b = self._b
        key, replayed = b.call("sleep", 0)
        pending = b.pending(key)
        if replayed is None:
            until = time.time() + seconds
            b.port.journal(JournalEntry(request_id=key, kind="sleep", result=until))
        elif seen_result(replayed) is not None:
            b.resolve(key, None)
            return pending
        else:
            made = replayed[0].result
            until = float(made) if isinstance(made, int | float) else time.time()
        b.sleepers[key] = pending
        left = max(0.0, until - time.time())
        # awaited alone, it keeps the run's slot (parking.py), while the brief sleeps of the
        # run add up to no more than BRIEF_SLEEP_S: a loop of them (polling) is waiting
        counted = max(left, BRIEF_SLEEP_FLOOR_S)
        if counted <= b.brief_sleep_left:
            b.brief_sleep_left -= counted
            b.brief_sleeps = b.brief_sleeps | {key}
        b.port.wake_after(key, left)
        return pending

    def gather(self, *pendings: Pending) -> Pending:
        """Await several operations together; values in order (first error raised)."""
        for part in pendings:
            if not isinstance(part, Pending):
                raise TypeError(
                    f"gather() takes ctx operations (spawn, send, receive...), not {part!r}"
                )
        b = self._b
        digest = call_digest(*(p.key for p in pendings))
        key, replayed = b.call("gather", digest, f"{len(pendings)} calls")
        if replayed is None:
            b.port.journal(JournalEntry(request_id=key, kind="gather", digest=digest))
        group = PendingAll(key, tuple(pendings))
        b.groups = (*b.groups, group)
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


def _seconds(call: str, name: str, value: Any) -> float:
    if type(value) is float and value == value:  # (most: a float, not NaN; no C call)
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise TypeError(f"{call}(): {name} must be a number of seconds, got {value!r}")
    return float(value)


def _check_send_types(to: object, content: object, reply_to: object) -> None:
    """``TypeError`` naming what is wrong with the types of a ``send``'s arguments (in
    ``supervision.requests.mail_problem``'s words); a ``str`` subclass is a string."""
    if not (isinstance(to, str) and isinstance(content, str)):
        raise TypeError(
            f"send(): to and content must be strings, got {type(to).__name__} and"
            f" {type(content).__name__}"
        )
    if reply_to is not None and not isinstance(reply_to, str):
        raise TypeError(f"send(): reply_to must be a string, got {type(reply_to).__name__}")
