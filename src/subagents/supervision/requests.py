"""One validation of what a run is asked to do, whoever asks: ``Runtime.run`` and
``Runtime.spawn``, the command line, a function agent's ``ctx.spawn``, an LLM's spawn tool.

Why one place: the Python API and the command line used to check different things (a
timeout above the maximum was an error on the command line and silently capped in Python; an
empty task was refused by one and accepted by the other). Every entry point now calls
``request_problem`` and refuses with its answer, so one request gets one answer everywhere.

Nothing checks a msgspec Struct's field types when it is built in code, so the types are
checked here too, naming the field, rather than failing deep in the supervisor. The size of
texts (a task, a mail, a result) is capped by ``Limits.max_text_chars``: a 50 MiB task was
accepted and stored (three times over) before.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import unicodedata
from typing import Any

import msgspec

from subagents.messages import SendMail, SpawnRequest
from subagents.supervision.budgets import tightest_cost, tightest_tokens
from subagents.supervision.limits import Limits, shown
from subagents.supervision.policy_settings import PolicyError, on_failure_value

LABEL_CHARS = 200
"""The longest label a run may be given: a short name for views, not a text."""

MAX_NESTING = 100
"""How deep a JSON-like value (shared context, a function agent's result) may nest: far past
any real data, far below where msgspec's encoder and decoder reach Python's recursion limit
(about 1,000 levels, fewer on a deep stack), which made such a value fail inside the
supervisor or in a later reader."""


class CheckedRoots:
    """Root spawn requests the runtime checked with ``request_problem`` on its caller's
    thread (``RootRuns.spawn``, ``admit_many``) before telling them to the supervisor,
    against ``limits``, the core's own: their admission does not check them again
    (``Admission._proposed``). Why: the same frozen request against the same frozen limits
    gets the same answer, and the second check was ~10 of the supervisor's calls per
    trivial run. Not a request with ``shared`` values: they are the caller's objects, which
    it may change until then. Kept by request id with the request itself, and only that very
    object counts: a copy, or another sender's request under that id, is checked in full.
    ``requests`` is a plain dict on purpose: one item stored on the caller's thread and one
    popped on the supervisor's, each atomic under the GIL, and each no Python call on the
    hot path."""

    __slots__ = ("limits", "requests")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.requests: dict[str, SpawnRequest] = {}

    def take(self, request: SpawnRequest) -> bool:
        """Whether ``request`` is one the runtime checked (forgotten here: taken once)."""
        request_id = request.request_id
        if type(request_id) is not str:  # (a bad sender's: not one stamped by the runtime)
            return False
        return self.requests.pop(request_id, None) is request

    def forget(self, request_id: str) -> None:
        """A checked request that will not reach the supervisor, or was refused unseen."""
        self.requests.pop(request_id, None)


def text_problem(what: str, text: str, cap: int) -> str | None:
    """Why ``text`` (a task, a mail, a result) is too large, naming its size and the cap, or
    cannot be kept (UTF-8 cannot encode it)."""
    if len(text) > cap:
        return (
            f"{what} is {len(text):,} characters, over the cap of {cap:,}"
            " (Limits.max_text_chars; raise it, or hand the text over as a file)"
        )
    return encoding_problem(what, text)


def encoding_problem(what: str, text: str) -> str | None:
    """Why UTF-8 cannot encode ``text`` (a lone surrogate, as from a bad decode), or None.
    Such a text was accepted and then failed where it was stored, inside the supervisor."""
    if text.isascii():  # O(1): the common case costs nothing
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"{what} holds a lone surrogate ({text[exc.start]!r} at position {exc.start}),"
            " which UTF-8 cannot encode"
        )
    return None


def refuse_unkeepable_id(run_id: object) -> None:
    """A run id UTF-8 cannot encode (a lone surrogate, as from argv's bad bytes) names no
    run: ``ValueError`` naming it, at the caller (it failed in the store's look-up as a bare
    ``UnicodeEncodeError``, or inside the supervisor). Other types are left to their checks."""
    problem = encoding_problem("the run id", run_id) if isinstance(run_id, str) else None
    if problem is not None:
        raise ValueError(f"no run {run_id!r}: {problem}")


def as_a_terminal_shows(text: str) -> str:
    """``text`` with each lone surrogate (a bad decode's) replaced by U+FFFD, as a terminal
    shows an undecodable byte; a surrogate pair held as two code points is joined. For text
    the runtime takes from outside and must keep whatever it holds (a tool's output): UTF-8
    cannot store a lone surrogate, and refusing the output would lose the rest of it."""
    if text.isascii():  # O(1): the common case costs nothing
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def _line_problem(label: str) -> str | None:
    """Why ``label`` is not one line of printable text (a newline, a terminal escape: a
    label is shown in every view's row, and the console's), or None."""
    for i, char in enumerate(label):
        if unicodedata.category(char) == "Cc":
            return (
                f"the label holds a control character (U+{ord(char):04X} at position {i});"
                " a label is one line of text"
            )
    return None


def value_problem(what: str, value: Any) -> str | None:
    """Why ``value`` cannot be kept as JSON data: nested more than ``MAX_NESTING`` levels
    (or containing itself), or holding a text UTF-8 cannot encode; None when it can (other
    types are left to the encoder, whose error names them). Iterative, so that a deep value
    cannot make the check itself recurse."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            problem = encoding_problem(f"a text in {what}", item)
            if problem is not None:
                return problem
            continue
        children = _children(item)
        if children is None:
            continue
        if depth >= MAX_NESTING:
            return (
                f"{what} is nested more than {MAX_NESTING} levels deep (or contains itself);"
                " flatten it, or hand it over as a file"
            )
        stack.extend((child, depth + 1) for child in children)
    return None


def _children(item: Any) -> list[Any] | None:
    """What a container holds (a dict: its keys and values), None for anything else."""
    if isinstance(item, dict):
        return [*item.keys(), *item.values()]
    if isinstance(item, list | tuple | set | frozenset):
        return list(item)
    if isinstance(item, msgspec.Struct):
        return [getattr(item, name) for name in item.__struct_fields__]
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return [getattr(item, f.name) for f in dataclasses.fields(item)]
    return None


def _number_problem(what: str, value: Any) -> str | None:
    """Why ``value`` (nested no deeper than ``value_problem`` allows) holds a number JSON
    cannot keep: NaN or an infinity is kept as ``null``, so a run restored from the store
    would read ``None`` where it was given a number, unsaid."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return (
                f"{what} holds {item!r}, a number JSON cannot keep (the store would give it"
                " back as null): give a finite number, or None"
            )
        stack.extend(_children(item) or ())
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _keys(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(k, str) for k in value)


_OPTION_TYPES: tuple[tuple[str, str, Any], ...] = (
    ("context", "a string", _text),
    ("model", "a string", _text),
    ("label", "a string", _text),
    ("timeout", "a number of seconds", _number),
    ("token_budget", "an integer", _integer),
    ("cost_budget_usd", "a number", _number),
    ("on_failure", "a string", _text),
    ("max_retries", "an integer", _integer),
    ("shared", "a mapping", lambda v: isinstance(v, dict)),
    ("cleanup", "a string", _text),
    ("continues", "a run's id (a string)", _text),
    ("detach", "True or False", _flag),  # (before background: a detached child's is set)
    ("background", "True or False", _flag),
    ("inherit_messages", "True or False", _flag),
    ("share", "a list of key names", _keys),
)
"""Each spawn option and the type its value must have (None: not given, for all of them)."""


def option_type_problem(req: SpawnRequest) -> str | None:
    """The first option of ``req`` whose value is of the wrong TYPE, named with the type it
    got (``rt.spawn``, ``rt.run`` and ``ctx.spawn`` raise it as a ``TypeError`` before
    anything starts: the call is wrong, as for any argument's kind; ``spawn_many`` refuses
    that job alone), or None. A value of the right type that cannot be used (a negative
    timeout, an unknown ``on_failure``) is ``request_problem``'s and the policy book's."""
    for name, value in (("agent", req.agent), ("task", req.task)):
        if not isinstance(value, str):
            return f"{name} must be a string, got {type(value).__name__}"
    if (  # (most spawns set none of them: no walk)
        req.context is None
        and req.model is None
        and req.label is None
        and req.timeout is None
        and req.token_budget is None
        and req.cost_budget_usd is None
        and req.on_failure is None
        and req.max_retries is None
        and req.shared is None
        and req.cleanup is None
        and req.continues is None
        and req.background is False
        and req.detach is False
        and req.inherit_messages is None
        and req.share == ()
    ):
        return None
    for name, kind, fits in _OPTION_TYPES:
        value = getattr(req, name)
        if value is not None and not fits(value):
            return f"{name} must be {kind}, got {_type_got(name, value)}"
    return None


def _type_got(name: str, value: Any) -> str:
    """The type of ``value`` as the caller gave it: ``share``'s key names (a list made a
    tuple by ``ctx.spawn``) with one that is no string are named by that one's type."""
    if name == "share" and isinstance(value, tuple):
        for key in value:
            if not isinstance(key, str):
                return f"{type(key).__name__} among its key names"
    return type(value).__name__


def request_problem(req: SpawnRequest, limits: Limits) -> str | None:
    """Why a spawn request cannot be admitted as asked, or None. Checks the request alone
    (types, an empty task, sizes, the timeout against the maximum); what depends on the
    runtime's state (the agent, depth, budgets, queue) is the supervisor's to judge."""
    if not isinstance(req.agent, str) or not isinstance(req.task, str):
        return (
            f"agent and task must be strings, got {type(req.agent).__name__} and"
            f" {type(req.task).__name__}"
        )
    if not req.agent.strip() and req.continues is None:  # a continuation takes its run's
        return "no agent given (agent is empty)"
    if not req.task.strip():
        if not req.agent.strip():  # a continuation's agent is its run's, not yet read
            return f"the text to continue {req.continues} with is empty: say what comes next"
        return f"the task for {req.agent!r} is empty: say what the agent should do"
    for name, value in (("context", req.context), ("label", req.label), ("model", req.model)):
        if value is not None and not isinstance(value, str):
            return f"{name} must be a string, got {value!r}"
    if req.model is not None and not req.model.strip():  # (not a name: taken as given)
        return "model is empty: name a model, or leave it out for the agent's own"
    if req.cleanup is not None and req.cleanup not in ("keep", "delete"):
        return f"cleanup must be 'keep' or 'delete', got {req.cleanup!r}"
    if req.detach and req.parent_run_id is None:
        return "detach is for a child: a root run has no parent to outlive"
    if not _plain_task(req, limits.max_text_chars):  # (most requests: nothing more to check)
        problem = _texts_problem(req, limits.max_text_chars)
        if problem is not None:
            return problem
    if req.token_budget is not None and (
        isinstance(req.token_budget, bool) or not isinstance(req.token_budget, int | float)
    ):
        return f"token_budget must be a number, got {req.token_budget!r}"
    return None if req.timeout is None else timeout_problem(req.timeout, limits)


def _plain_task(req: SpawnRequest, cap: int) -> bool:
    """Whether the request's only text is its task, in ASCII within ``cap``: then
    ``_texts_problem`` has nothing to find (its three calls deep per text, on every spawn's
    caller and again in the supervisor's admission, skipped)."""
    return (
        req.context is None
        and req.label is None
        and req.model is None
        and req.shared is None
        and len(req.task) <= cap
        and req.task.isascii()
    )


def policy_problem(req: SpawnRequest) -> str | None:
    """Why the request's own policy settings (``on_failure``, ``max_retries``, its budgets,
    its shared context) cannot be right whatever the runtime's state, in the policy book's
    words. Why: ``Runtime.spawn`` tells its request and returns before the supervisor
    decides; a bad setting is the caller's mistake, so the runtime raises it at once
    (``RootRuns``) instead of leaving it to the handle. Not part of ``request_problem``: the
    supervisor runs that for every spawn, and the policy book checks these settings anyway
    with what depends on the state (a definition's policy, a parent's budget)."""
    if (
        req.on_failure is None
        and req.max_retries is None
        and req.token_budget is None
        and req.cost_budget_usd is None
        and not req.shared
    ):  # (most requests set none of them: ~2.5 us of every root spawn's caller otherwise)
        return None
    try:
        if req.on_failure is not None:
            on_failure_value("on_failure", req.on_failure)
        problem = max_retries_problem(req.max_retries)
        if problem is not None:
            return problem
        tightest_tokens(req.token_budget)
        tightest_cost(req.cost_budget_usd)
    except (PolicyError, ValueError) as exc:
        return str(exc)
    if req.shared:
        if not isinstance(req.shared, dict) or not all(isinstance(k, str) for k in req.shared):
            return f"shared context must be a mapping of names to values, got {req.shared!r}"
        try:
            msgspec.json.encode(req.shared)
        except (TypeError, ValueError, RecursionError, msgspec.EncodeError) as exc:
            return f"shared context must be JSON data: {exc}"
    return None


def _texts_problem(req: SpawnRequest, cap: int) -> str | None:
    """Why a request's texts or shared context cannot be kept: too large, a lone surrogate,
    a shared value nested too deep."""
    problem = text_problem("the task", req.task, cap)
    if problem is None and req.context is not None:
        problem = text_problem("the context", req.context, cap)
    if problem is None and req.label is not None:
        if len(req.label) > LABEL_CHARS:
            return (
                f"the label is {len(req.label):,} characters, over the cap of {LABEL_CHARS}"
                " (a label is a short name for views; put the text in the task or context)"
            )
        problem = encoding_problem("the label", req.label) or _line_problem(req.label)
    if problem is None and req.model is not None:
        problem = encoding_problem("the model", req.model)
    if problem is None and isinstance(req.shared, dict):
        for key, value in req.shared.items():  # the key named: what to look at
            problem = (
                value_problem("the keys of shared", key)
                or value_problem(f"shared[{key!r}]", value)
                or _number_problem(f"shared[{key!r}]", value)
            )
            if problem is not None:
                return problem
    return problem


def timeout_problem(timeout: Any, limits: Limits) -> str | None:
    """Why a requested timeout cannot be used: not a positive finite number of seconds, or
    above the maximum (an error, never silently capped: the caller asked for more time than
    the runtime allows, and should know it will not get it)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        return f"timeout must be a number of seconds, got {timeout!r}"
    if timeout <= 0 or (isinstance(timeout, float) and not math.isfinite(timeout)):
        # (an int past every float is not shown whole: its repr can raise, past Python's
        # digits limit, and would fill the error)
        big = isinstance(timeout, int) and timeout < -sys.float_info.max
        shown = "an int below -1e+308" if big else repr(timeout)
        return f"timeout must be a positive number of seconds, got {shown}"
    if timeout > limits.max_timeout_s:  # (an int past every float: not ``:g``, it raised)
        shown = f"{timeout:g} s" if timeout <= sys.float_info.max else "of more than 1e+308 s"
        return (
            f"timeout {shown} is above the maximum of {limits.max_timeout_s:g} s"
            " (Limits.max_timeout_s)"
        )
    return None


def mail_problem(msg: SendMail, limits: Limits) -> str | None:
    """Why a mail cannot be sent as written (its fields' types, its size), or None: that
    mail fails, not the others sent with it."""
    to, content = msg.to, msg.content
    if (type(to) is not str and not isinstance(to, str)) or (
        type(content) is not str and not isinstance(content, str)
    ):
        return (
            f"to and content must be strings, got {type(msg.to).__name__} and"
            f" {type(msg.content).__name__}"
        )
    reply_to = msg.reply_to
    if reply_to is not None and not isinstance(reply_to, str):
        return f"reply_to must be a string, got {reply_to!r}"
    if (  # the common mail (ASCII within the cap) answered here: three calls fewer per mail
        len(msg.content) <= limits.max_text_chars
        and msg.content.isascii()
        and msg.to.isascii()
        and (reply_to is None or reply_to.isascii())
    ):
        return None
    problem = encoding_problem("the recipient", msg.to)
    if problem is None and msg.reply_to is not None:
        problem = encoding_problem("reply_to", msg.reply_to)
    return problem or text_problem("the mail", msg.content, limits.max_text_chars)


def max_retries_problem(value: object) -> str | None:
    """Why ``max_retries`` cannot be used (an integer >= 0), or None (also for None)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        return f"max_retries must be an integer >= 0, got {shown(value)}"
    return None
