"""Texts UTF-8 cannot encode (a lone surrogate: a bad decode's, ``surrogateescape``'s)
where a store finds them too late to refuse them: repaired, each lone surrogate as U+FFFD
(as a terminal shows an undecodable byte), and named in the log.

Why: a store refuses such a text in the write that brings it (``encode_row``: a
``ValueError`` naming it, at the call, so only that write's nested batch fails), but the
SQLite store encodes a batch's held events' run fields (run id, agent, root, parent) only
when the batch is sent (``sqlite_event_groups``: a run's events as one row, each event's
data checked when held, but a straight mail's two events' (``AppendEvent.checked``), held
unchecked since session 32). A lone surrogate there failed the whole batch at its commit:
every other run's writes of the group lost, for one event's name (and, before session 31,
the transaction was left open, holding the file's write lock). Checking each held event's
run fields when held would cost every durable mail's two events; repaired when sent, it
costs nothing until one is found.

Keys a store holds raw in a batch, not inside a row it encodes (the mail ids of
``set_mail_state``/``set_mails_state``, a subscription's run, root and topic, the run of
``drop_subscriptions``, ``mark_outcome_delivered``, ``drop_preview``), are checked at the
call (``keys_checked``): such a key used to fail its whole batch when the batch was sent
(cleanly since session 31, but every other write of the group lost); it is now refused alone,
a ``ValueError`` naming it, its nested batch alone failed (session 32). An id is ASCII nearly
always: the check is ``isascii`` then, no encoding."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from subagents.logs import get_logger
from subagents.messages import Event

log = get_logger("subagents.store")


def repaired(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a surrogate pair held as two
    code points is joined)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def event_repaired(event: Event) -> Event:
    """``event`` with its run fields and the texts of its data (keys and values, at any
    depth) repaired (``repaired``), each repaired field named in the log; ``event`` itself
    when none needs it. Its data too: an event a write says is sure
    (``AppendEvent.checked``) is held unchecked, so a lone surrogate there is first found
    when its batch is sent, as one in any held event's run fields."""
    fields: dict[str, Any] = {
        "run_id": event.run_id,
        "agent": event.agent,
        "root_run_id": event.root_run_id,
        "parent_run_id": event.parent_run_id,
    }
    changed: dict[str, Any] = {
        name: fixed
        for name, text in fields.items()
        if isinstance(text, str) and (fixed := repaired(text)) != text
    }
    data = _value_repaired(event.data)
    if data is not event.data:
        fields["data"] = event.data
        changed["data"] = data
    if not changed:
        return event
    log.warning(
        "an event's texts hold a lone surrogate, which UTF-8 cannot encode: kept with"
        " U+FFFD in its place, the rest of its batch kept",
        kind=event.kind.value,
        fields=sorted(changed),
        texts={name: repr(fields[name])[:200] for name in changed},
    )
    return msgspec.structs.replace(event, **changed)


def _value_repaired(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, texts, ...) with each text repaired;
    ``value`` itself when none needs it."""
    if isinstance(value, str):
        return repaired(value)
    if isinstance(value, dict):
        items = [(_value_repaired(k), _value_repaired(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list | tuple):
        repaired_items = [_value_repaired(item) for item in value]
        if all(a is b for a, b in zip(repaired_items, value, strict=True)):
            return value
        return repaired_items if isinstance(value, list) else tuple(repaired_items)
    return value


def keys_checked(doing: str, keys: Iterable[str | None]) -> None:
    """A ``ValueError`` (``refused``: what it was ``doing`` and the key, named) when one of
    ``keys``, held raw until its batch is sent, holds a lone surrogate (see the module)."""
    for key in keys:
        if key is None or key.isascii():
            continue
        try:
            key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise refused(exc, doing) from None


def refused(exc: UnicodeEncodeError, doing: str) -> ValueError:
    """The ``ValueError`` (a bad argument: ``RunStore``) of a statement whose text parameter
    UTF-8 cannot encode, found as the statement was bound (nothing of it run): what it was
    doing and the text, named (``escaped``). It was a bare ``UnicodeEncodeError`` from the
    database's driver (SQLite's, psycopg's) that named neither."""
    text = exc.object if isinstance(exc.object, str) else str(exc.object)
    shown = text if len(text) <= 80 else text[:80] + "..."
    return ValueError(
        escaped(
            f"{doing}: the text {shown!r} holds a lone surrogate"
            f" ({text[exc.start : exc.end]!r}), which UTF-8 cannot encode: nothing of this"
            " call is kept"
        )
    )


def escaped(message: str) -> str:
    """``message`` with each character UTF-8 cannot encode written as its escape
    (``\\ud800``): an error naming such a text (a run id in what it was doing) could not
    itself be printed or logged."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")
