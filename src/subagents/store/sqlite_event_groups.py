"""A batch's events of one run as one row of the SQLite store's ``events`` table (schema v13).

Why: the supervisor's only writes per durable straight mail are two event rows (``mail_sent``
on its sender, ``mail_delivered`` on its recipient), held in its open group and sent at the
group's commit (``store.deferred``). A row each cost the group a row's insert, its
``events_run`` index entry and its bytes (each event's run fields, ~half its JSON, again),
and, natively, ~40% of the supervisor's CPU per mail. Now the events held in one stretch of a
batch (``DeferredWrites``: what one flush sends) are one row per run: the run's fields once,
then each event's kind, time and data. A ping-pong's group of ~20 mails writes 2 rows, not 40.

Nothing a reader sees changes: every event keeps the number it had as a row of its own.
The stretch's events are numbered in the order they were held, as their rows' were
(``base + 1 .. base + N``, ``base`` the table's last number, read by the statement itself);
each run's row takes the number of its last event (``seq``), and says, for each of its
events, how far below it that event's number is, and how far above it the stretch ends
(``end``: ``events_after`` reads on to there, so a page never splits a stretch's numbers
wrongly). The numbers below a row's own are never a row's: ``AUTOINCREMENT`` gives a new row
one above every number ever used. ``events(run_id)``, ``events_after`` and
``last_event_seq`` read exactly the events, numbers and order they read when each was a row
(tests/store/test_event_groups.py holds the two ways side by side).

A stretch of one event is the row it always was. An event written outside a batch is too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import msgspec

from subagents.logs import get_logger
from subagents.messages import Event, EventKind, StoredEvent
from subagents.store.deferred import GROUPED, Params, joined
from subagents.store.lone_surrogates import escaped, event_repaired
from subagents.store.row_checks import READS_BACK, flat_event_reads_back

GROUP_KIND = "events"
"""The ``kind`` column of a group row (no event's kind: those are ``EventKind`` values)."""

HELD_EVENT = "INSERT INTO events (run_id, kind, ts, event) VALUES (?, ?, ?, ?) -- held"
"""An event held in a batch (``held_row``): its row's columns, its own part of a group's
document (kind, time, data: ``item_text``) or None (a flat event, encoded when sent) and
the event; turned into statements by ``statements``."""

_PLAIN = "INSERT INTO events (run_id, kind, ts, event) VALUES (?, ?, ?, ?)"

_NUMBERED = (
    "INSERT INTO events (seq, run_id, kind, ts, event) VALUES"
    " (coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) + ?, ?, ?, ?, ?)"
)
"""A group row, numbered ``?`` above the last number the table gave (``AUTOINCREMENT``'s
own count, which every row, and these, move on)."""

_encoder = msgspec.json.Encoder()
_isfinite = math.isfinite
log = get_logger("subagents.store")


class _Group(msgspec.Struct, frozen=True, array_like=True):
    """A group row's document: the run's fields, the stretch's end above the row's number,
    and each event as (how far below the row's number, kind, time, data), in order."""

    run: tuple[str, str, str, str | None, int]
    end: int
    events: list[tuple[int, EventKind, float, dict[str, Any]]]

    def __post_init__(self) -> None:
        """Numbers as the writer gives them (the row's number is its last event's; each
        earlier event below the next; the stretch's end not below the row), or the row is
        damaged (decoding names it): a hand-edited offset would put an event above later
        ones, and a follower, paging past it, would never show those."""
        backs = [event[0] for event in self.events]
        if self.end < 0 or not backs or backs[-1] != 0:
            raise ValueError("a group row's numbers are not its writer's")
        if any(earlier <= later for earlier, later in itertools.pairwise(backs)):
            raise ValueError("a group row's events are not numbered in order")


_group_decoder = msgspec.json.Decoder(_Group)
_sure = READS_BACK[Event]
"""``row_checks``' check of an event: its run's fields too, which the group's row holds."""


def item_text(event: Event) -> str | None:
    """The event's own part of a group's document (``[kind, ts, data]``) if the event surely
    reads back (``row_checks``: its fields' types, a finite time, a short document); None
    when not, or when it cannot be encoded: the caller checks it as a row (``encode_row``),
    says what was wrong, and writes it as a row of its own (a long document may be nested
    near the decoder's limit, which a group row's two levels more would pass)."""
    try:
        raw = _encoder.encode((event.kind, event.ts, event.data))
    except (TypeError, msgspec.EncodeError, UnicodeEncodeError):
        return None
    return raw.decode("utf-8") if _sure(event, raw) else None


def held_row(event: Event) -> Params | None:
    """``event`` as a ``HELD_EVENT`` row if it surely reads back inside a group row; None if
    not (the caller checks it as a row of its own: ``item_text``). A flat event
    (``row_checks.flat_event_reads_back``: a straight mail's two) is held unencoded: its
    run's row encodes it when the batch is sent, every event of the run in one call, as a
    stretch of rows of their own encoded each event when sent already (``_plain``). Why:
    an event encoded to be held and its text joined again into its group's cost the
    supervisor ~1 us of a durable mail's two events (``benchmarks/README.md``, session 26).
    A held event is not copied: an ``Event`` is frozen, and nothing changes its ``data``
    after it is appended (a stretch of rows of their own never read it sooner)."""
    kind = event.kind._value_  # (the member's own attribute: ``.value`` is 2 Python calls)
    if flat_event_reads_back(event):
        return (event.run_id, kind, event.ts, None, event)
    text = item_text(event)
    return None if text is None else (event.run_id, kind, event.ts, text, event)


def held_checked(event: Event) -> Params | None:
    """``event`` as a ``HELD_EVENT`` row, unencoded and unchecked: a write that says it is
    sure (``AppendEvent.checked``: a straight mail's two events, known to encode and read
    back from the records they are made of). It is encoded with its run's row when the
    batch is sent, as a flat one is; ``statements_kept`` repairs or refuses it there should
    that trust ever break. Its time alone is looked at (``held_row`` when it is not a
    finite float): no record vouches for it (the supervisor's clock), and a NaN would be
    written as ``null``, encoded without error and never read back (the run's events
    unreadable past it), which ``statements_kept`` could not catch."""
    ts = event.ts
    if type(ts) is float and _isfinite(ts):
        return (event.run_id, event.kind._value_, ts, None, event)
    return held_row(event)


def statements(rows: list[Params]) -> list[tuple[str, Params]]:
    """The statements of a stretch's held events (``HELD_EVENT`` rows, in the order held):
    one row as the row it always was; several as a row per run (see the module)."""
    total = len(rows)
    runs: dict[str, list[tuple[int, Params]]] = {}
    for number, row in enumerate(rows, 1):
        its = runs.get(row[0])
        if its is None:
            runs[row[0]] = [(number, row)]
        else:
            its.append((number, row))
    if len(runs) == total:  # no run has two: rows of their own, as many to a statement as
        return _plain(rows)  # before (a group per mail: valgrind's slow clock, a slow machine)
    out: list[tuple[str, Params]] = []
    below = 0  # the number the previous row took, above the stretch's base
    for its in sorted(runs.values(), key=lambda items: items[-1][0]):
        top = its[-1][0]
        first = its[0][1]
        event: Event = first[4]
        run = (event.run_id, event.agent, event.root_run_id, event.parent_run_id, event.depth)
        if all(row[3] is None for _, row in its):  # flat (a mail's): encoded here, in one call
            items = [(top - number, row[1], row[2], row[4].data) for number, row in its]
            text = _encoder.encode((run, total - top, items)).decode("utf-8")
        else:  # some encoded when held: their texts joined
            text = _joined_group(run, total - top, [(top - number, row) for number, row in its])
        out.append((_NUMBERED, (top - below, first[0], GROUP_KIND, first[2], text)))
        below = top
    return out


def _joined_group(run: tuple[Any, ...], end: int, items: list[tuple[int, Params]]) -> str:
    """A group row's document from its events' texts (``item_text``, or encoded now: a flat
    one), each below the row's number by ``back``."""
    parts = [
        f"[{back},{(row[3] or _encoder.encode((row[1], row[2], row[4].data)).decode())[1:]}"
        for back, row in items
    ]
    return f"[{_encoder.encode(run).decode()},{end},[{','.join(parts)}]]"


def _plain(rows: list[Params]) -> list[tuple[str, Params]]:
    """``rows`` as rows of their own, ``_MANY`` to a statement, numbered as inserted."""
    out: list[tuple[str, Params]] = []
    for start in range(0, len(rows), _MANY):
        chunk = rows[start : start + _MANY]
        values: list[Any] = []
        for run_id, kind, ts, _, event in chunk:
            values += (run_id, kind, ts, _encoder.encode(event).decode("utf-8"))
        out.append((joined(_PLAIN, len(chunk)), tuple(values)))
    return out


_MANY = 16
"""Plain rows to a statement (as ``deferred.MANY_ROWS`` sends the rows of other tables)."""


def statements_kept(rows: list[Params]) -> list[tuple[str, Params]]:
    """``statements``; should an event held unencoded (a flat one, whose run fields
    ``held_row`` does not encode: a check per durable mail's event; a ``checked`` one, not
    checked at all) fail to encode when sent, each held event is repaired or refused alone
    (``_kept_alone``), not the whole batch failed at its commit (for the supervisor's group:
    every run's writes lost, an outage, for one event)."""
    try:
        return statements(rows)
    except _UNENCODABLE:
        return statements(_kept_alone(rows))


_UNENCODABLE = (ValueError, TypeError, OverflowError, RecursionError, msgspec.EncodeError)
"""What msgspec's encoder raises for what it cannot encode (``UnicodeEncodeError`` is a
``ValueError``: a lone surrogate; ``TypeError``: a value of a type it does not know)."""


def _kept_alone(rows: list[Params]) -> list[Params]:
    """``rows`` with each event's texts repaired (``lone_surrogates.event_repaired``: a lone
    surrogate in its run fields or its data, as U+FFFD, named in the log), and any event
    that still cannot be encoded (a value msgspec does not know, in a ``checked`` event's
    data) left out, named in the log as an error: one event refused, as ``append_event``
    refuses one it checks (``encode_row``), the rest of the batch kept."""
    kept: list[Params] = []
    for row in rows:
        event: Event = row[4]
        try:
            event = event_repaired(event)
            _encoder.encode(event)
        except _UNENCODABLE as exc:
            log.error(
                "an event held to be written cannot be encoded: left out, the rest of its"
                " batch kept",
                kind=event.kind._value_,
                run_id=escaped(str(event.run_id)),
                error=escaped(repr(exc)),
            )
            continue
        kept.append(row if event is row[4] else (event.run_id, *row[1:4], event))
    return kept


GROUPED[HELD_EVENT] = statements_kept


def expand(seq: int, raw: str, decode: Any) -> tuple[list[tuple[int, Event]], int]:
    """A group row's events with their numbers, in order, and its stretch's last number
    (``decode``: ``Transactions.decode`` bound to the row, naming it if damaged)."""
    group: _Group = decode(_group_decoder, raw)
    run_id, agent, root, parent, depth = group.run
    events = [
        (
            seq - back,
            Event(
                kind=kind,
                run_id=run_id,
                agent=agent,
                root_run_id=root,
                parent_run_id=parent,
                depth=depth,
                ts=ts,
                data=data,
            ),
        )
        for back, kind, ts, data in group.events
    ]
    return events, seq + group.end


def _number(item: tuple[int, Event]) -> int:
    return item[0]


def in_order(numbered: Iterable[tuple[int, Event]], after: int, limit: int) -> list[StoredEvent]:
    """The first ``limit`` of ``numbered`` above ``after``, by number."""
    kept = sorted(((n, e) for n, e in numbered if n > after), key=_number)
    return [StoredEvent(seq=n, event=e) for n, e in kept[: max(0, limit)]]
