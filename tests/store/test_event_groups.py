"""store/sqlite_event_groups.py: a batch's events of one run kept as one row read exactly as
rows of their own would: the same events, numbers and order, through every reader, whether
held one by one or a line of writes at once (``store.writes.write_all``); a bad event still
refused by name before anything is held, whatever its shape; a damaged group row named.
A straight mail's flat events are held unencoded and a line's events in one call (session
26's attempt, reverted then as under the 2% rule alone; taken again in session 29 with the
durable goal's other cuts: benchmarks/README.md)."""

from __future__ import annotations

import json
import random
import sqlite3
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from storekit import run as run_record

from subagents.messages import Event, EventKind
from subagents.store.base import StoreError
from subagents.store.row_checks import FLAT_CHARS, flat_event_reads_back
from subagents.store.sqlite import SQLiteStore
from subagents.store.writes import AppendEvent, SaveRun, Write, write_all

_KINDS = (EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED, EventKind.STEP, EventKind.TOOL_CALL)


def _events(n: int, seed: int) -> list[Event]:
    """``n`` events of five runs (some with a parent), kinds and data of every shape: every
    third flat (a straight mail's: ids), the others not."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        run = f"r{rng.randrange(5)}"
        out.append(
            Event(
                kind=rng.choice(_KINDS),
                run_id=run,
                agent=f"agent of {run}",
                root_run_id="r0",
                parent_run_id=None if run == "r0" else "r0",
                depth=0 if run == "r0" else 1,
                ts=1000.0 + i / 7,
                data=(
                    {"mail_id": f"m{i}", "recipient": f"r{i % 5}"}
                    if i % 3 == 0
                    else {"i": i, "nested": {"list": [i, "x", None]}, "text": 'é\n"q"'}
                ),
            )
        )
    return out


def _write_grouped(store: SQLiteStore, events: list[Event], seed: int) -> None:
    """``events`` in batches of random sizes: some alone, some nested, some flushed halfway
    by a read (each flush a stretch of its own)."""
    rng = random.Random(seed)
    i = 0
    while i < len(events):
        size = rng.choice((1, 1, 2, 3, 8, 20))
        chunk = events[i : i + size]
        i += size
        shape = rng.randrange(5)
        if shape == 0:
            for event in chunk:
                store.append_event(event)  # no batch: a row each, written at once
            continue
        if shape == 4:  # a line of writes at once, a run's record among the events
            writes: list[Write] = [AppendEvent(event) for event in chunk]
            writes.insert(len(chunk) // 2, SaveRun(run_record("r0")))
            with store.batch():
                write_all(store, writes)
            continue
        with store.batch():
            for k, event in enumerate(chunk):
                if shape == 2 and k == len(chunk) // 2:
                    store.get_run("nobody")  # a read: what was held is sent first
                if shape == 3 and k == len(chunk) // 2:
                    with store.batch():  # nested: a savepoint among the held events
                        store.append_event(event)
                    continue
                store.append_event(event)


@contextmanager
def _rows_and_grouped(tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two stores: one to write every event as a row of its own, one to group them."""
    rows = SQLiteStore(tmp_path / "rows.db")
    grouped = SQLiteStore(tmp_path / "grouped.db")
    try:
        yield rows, grouped
    finally:
        rows.close()
        grouped.close()


def _assert_same_pages(
    grouped: SQLiteStore, rows: SQLiteStore, afters: range, limits: tuple[int, ...]
) -> None:
    """Every page of ``events_after`` from each of ``afters`` at each of ``limits`` alike."""
    for after in afters:
        for limit in limits:
            assert grouped.events_after(after, limit=limit) == rows.events_after(
                after, limit=limit
            ), (after, limit)


def _grouped_store(db_path: Path) -> SQLiteStore:
    """A store holding 12 events of five runs written in one batch (some run has two: a
    group row)."""
    store = SQLiteStore(db_path)
    with store.batch():
        for event in _events(12, 5):
            store.append_event(event)
    return store


def _assert_named_damaged(store: SQLiteStore, seq: int, run: str) -> None:
    """Both readers over the damaged group row ``seq`` (of ``run``) name it."""
    with pytest.raises(StoreError, match=rf"cannot read events row {seq}"):
        store.events(run)
    with pytest.raises(StoreError, match=rf"cannot read events row {seq}"):
        store.events_after(0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grouped_events_read_as_rows_of_their_own_would(tmp_path: Path, seed: int) -> None:
    """The same 120 events written a row each (every one outside a batch) and in batches
    (grouped): every run's events, every page of ``events_after`` from every number at
    every size, and the last number, the same. Seen failing with a group row numbered at
    its first event instead of its last (``_NUMBERED``'s offsets), with ``events_after``
    not reading on to the end of the last row's stretch, and (sessions 26 and 29)
    with a run's flat events encoded when sent numbered one apart too many, or a line's
    last events never held."""
    events = _events(120, seed)
    with _rows_and_grouped(tmp_path) as (rows, grouped):
        for event in events:
            rows.append_event(event)
        _write_grouped(grouped, events, seed)
        count = sqlite3.connect(tmp_path / "grouped.db").execute("SELECT count(*) FROM events")
        assert count.fetchone()[0] < len(events)  # some were grouped: the test is about them
        assert grouped.last_event_seq() == rows.last_event_seq() == len(events)
        for run in {e.run_id for e in events}:
            assert grouped.events(run) == rows.events(run) == [e for e in events if e.run_id == run]
        _assert_same_pages(grouped, rows, range(0, len(events) + 1, 3), (1, 2, 5, 17, 1000))


def test_a_bad_event_in_a_batch_is_refused_by_name_and_the_rest_kept(db_path: Path) -> None:
    """An event that would not read back is refused when appended, naming its run, as a row
    of its own was: nothing of it held, the batch's other events kept and numbered in a
    row. Seen failing with the check skipped for held events (the NaN written, the run's
    events unreadable after)."""
    store = SQLiteStore(db_path)
    good = _events(6, 9)
    with store.batch():
        for event in good[:3]:
            store.append_event(event)
        bad = Event(kind=EventKind.STEP, run_id="bad", agent="a", root_run_id="bad", ts=1.0)
        with pytest.raises(
            ValueError, match=r"cannot store an event of run bad \(kind step\): .*NaN"
        ):
            store.append_event(Event(**{**_fields(bad), "ts": float("nan")}))
        with pytest.raises(
            ValueError, match=r"cannot store an event of run bad \(kind step\): .*object"
        ):
            store.append_event(Event(**{**_fields(bad), "data": {"x": object()}}))
        with pytest.raises(  # (a bare UnicodeEncodeError naming no run, no event, before)
            ValueError,
            match=r"^cannot store an event of run bad \(kind step\): a text in it holds a lone"
            r" surrogate \('\\ud800'\), which UTF-8 cannot encode$",
        ):
            store.append_event(Event(**{**_fields(bad), "data": {"x": ["a\ud800"]}}))
        for event in good[3:]:
            store.append_event(event)
    again = SQLiteStore(db_path)
    assert [s.event for s in again.events_after(0)] == good
    assert [s.seq for s in again.events_after(0)] == list(range(1, 7))
    assert again.events("bad") == []
    again.close()
    store.close()


def _fields(event: Event) -> dict[str, object]:
    return {f: getattr(event, f) for f in event.__struct_fields__}


def test_a_damaged_group_row_is_named(db_path: Path) -> None:
    """A group row that cannot be read is named by its number, as any damaged row is."""
    store = _grouped_store(db_path)
    conn = sqlite3.connect(db_path)
    (seq, run), *_ = conn.execute("SELECT seq, run_id FROM events WHERE kind = 'events'")
    conn.execute("UPDATE events SET event = '[1, 2' WHERE seq = ?", (seq,))
    conn.commit()
    conn.close()
    _assert_named_damaged(store, seq, run)
    store.close()


@pytest.mark.parametrize(
    "numbers",
    [
        pytest.param(("-1000", "0"), id="an event moved above later rows"),
        pytest.param(("0", "0"), id="two events at one number"),
        pytest.param(("1", "1"), id="the row not at its last event"),
    ],
)
def test_a_group_row_whose_numbers_were_edited_is_named_not_misread(
    db_path: Path, numbers: tuple[str, str]
) -> None:
    """A group row that reads as JSON but whose numbers are not its writer's (an event put
    above later rows: a follower paging past it would never show those) is damaged, named
    by its number, not read in a wrong order."""
    store = _grouped_store(db_path)
    conn = sqlite3.connect(db_path)
    rows = conn.execute("SELECT seq, run_id, event FROM events WHERE kind = 'events'")
    seq, run, document = next(
        (n, r, json.loads(raw)) for n, r, raw in rows if len(json.loads(raw)[2]) >= 2
    )  # a group of two events at least
    document[2][0][0], document[2][-1][0] = (int(n) for n in numbers)
    conn.execute("UPDATE events SET event = ? WHERE seq = ?", (json.dumps(document), seq))
    conn.commit()
    conn.close()
    _assert_named_damaged(store, seq, run)
    store.close()


def _nested(depth: int) -> dict[str, object]:
    data: dict[str, object] = {}
    for _ in range(depth):
        data = {"a": data}
    return data


def test_an_event_nested_near_the_decoders_limit_reads_back_in_a_batch(tmp_path: Path) -> None:
    """An event whose data is nested as deep as a row of its own still reads back is written
    in a batch and read back too: a group row holds it two levels deeper, past the decoder's
    limit, so a long event is a row of its own. Seen failing with it grouped (the run's
    events and every page of ``events_after`` over it unreadable after, on a file whose
    rows main's code read)."""
    deepest = 0
    for depth in range(1000, 900, -1):  # the deepest a row of its own takes and reads back
        store = SQLiteStore(tmp_path / f"row{depth}.db")
        try:
            store.append_event(Event(**{**_fields(_events(1, 0)[0]), "data": _nested(depth)}))
            store.events("r0")
            store.events_after(0)
        except (ValueError, StoreError, RecursionError):
            continue
        finally:
            store.close()
        deepest = depth
        break
    assert deepest > 900
    first = _events(1, 0)[0]
    deep = Event(**{**_fields(first), "data": _nested(deepest)})
    other = Event(**{**_fields(first), "run_id": "other"})
    store = SQLiteStore(tmp_path / "grouped.db")
    try:
        with store.batch():
            for event in (first, deep, other, first):
                store.append_event(event)
        assert store.events(first.run_id) == [first, deep, first]
        assert [s.event for s in store.events_after(0)] == [first, deep, other, first]
        assert [s.seq for s in store.events_after(0)] == [1, 2, 3, 4]
    finally:
        store.close()


def test_pages_read_alike_after_a_run_s_rows_are_deleted(tmp_path: Path) -> None:
    """A swept run's rows deleted (``sqlite_sweep``: ``DELETE FROM events WHERE run_id``)
    from both files: a group row holds one run's events, so the others read as before,
    at every page, with ``events_after`` reading group rows in chunks."""
    events = _events(200, 4)
    with _rows_and_grouped(tmp_path) as (rows, grouped):
        for event in events:
            rows.append_event(event)
        with grouped.batch():
            for event in events[:100]:
                grouped.append_event(event)
        with grouped.batch():
            for event in events[100:]:
                grouped.append_event(event)
        for path in ("rows.db", "grouped.db"):
            conn = sqlite3.connect(tmp_path / path)
            conn.execute("DELETE FROM events WHERE run_id IN ('r1', 'r3')")
            conn.commit()
            conn.close()
        _assert_same_pages(grouped, rows, range(0, len(events) + 1), (1, 3, 16, 40, 1000))


def _mail_event(i: int, run: str, **data: str) -> Event:
    return Event(
        kind=EventKind.MAIL_SENT,
        run_id=run,
        agent="pinger",
        root_run_id=run,
        ts=1000.0 + i,
        data={"mail_id": f"m{i}", **data},
    )


@pytest.mark.parametrize("line", [False, True], ids=["one by one", "a line of writes"])
def test_an_event_the_encoder_refuses_is_refused_when_held_and_the_rest_kept(
    db_path: Path, line: bool
) -> None:
    """An event whose data the encoder refuses (a lone surrogate) must be refused as it is
    appended, not when the batch is sent (there it would fail every write sent with it):
    the others kept and numbered in a row. Seen failing (sessions 26 and 29,
    which held a straight mail's events unencoded) with its flat check taking any ``str``
    (the batch's commit failing, nothing kept)."""
    store = SQLiteStore(db_path)
    good = [_mail_event(i, f"r{i % 2}") for i in range(6)]
    bad = _mail_event(9, "r0", recipient="r\ud800")
    with store.batch():
        for event in good[:3]:
            store.append_event(event)
        with pytest.raises(ValueError, match=r"event of run r0 \(kind mail_sent\).*lone surrogate"):
            if line:
                with store.batch():  # (``write_all``'s own nested batch: undone alone)
                    write_all(store, [AppendEvent(good[3]), AppendEvent(bad)])
            else:
                store.append_event(bad)
        for event in good[3:]:
            store.append_event(event)
    assert [s.event for s in store.events_after(0)] == good
    assert [s.seq for s in store.events_after(0)] == list(range(1, 7))
    store.close()


class _CountedEvents(SQLiteStore):
    """A store whose ``append_event`` is its own (a test counting its writes, a store
    failing one): ``write_all`` must call it for every event, not hold them itself."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.appended: list[Event] = []

    def append_event(self, event: Event) -> None:
        self.appended.append(event)
        super().append_event(event)


def test_a_store_whose_append_event_is_its_own_sees_every_event_of_a_line(
    db_path: Path,
) -> None:
    """Seen failing (sessions 26 and 29) with a ``SQLiteStore._apply_batch``
    holding a subclass's events itself."""
    store = _CountedEvents(db_path)
    events = [_mail_event(i, f"r{i % 2}") for i in range(4)]
    writes: list[Write] = [AppendEvent(e) for e in events]
    writes.insert(2, SaveRun(run_record("r0")))
    write_all(store, writes)
    assert store.appended == events
    assert [s.event for s in store.events_after(0)] == events
    store.close()


class _Str(str):
    """A str subclass: encodes as a str, but not the exact type a check may ask for."""


_ODD_MAIL_EVENTS = {
    "nan time": {"ts": float("nan")},
    "infinite time": {"ts": float("inf")},
    "an int time": {"ts": 1000},
    "a huge depth": {"run_id": "r1", "depth": 2**70},  # (its run's own row: a group row
    # holds its run's fields once, from its first event, on main as here)
    "a bool depth": {"depth": True},
    "a str subclass run": {"run_id": _Str("r0")},
    "a kind given as its str": {"kind": "mail_sent"},
    "a key not a str": {"data": {1: "m1"}},
    "a huge int in data": {"data": {"mail_id": 2**80}},
    "a nested data": {"data": {"mail_id": {"id": "m1"}}},
    "a str subclass value": {"data": {"mail_id": _Str("m1")}},
    "not ascii": {"data": {"mail_id": "m\u00e9"}},
    "a surrogate": {"data": {"mail_id": "m\ud800"}},
    "control characters": {"data": {"mail_id": "\x00\x01\x7f"}},
    "long": {"data": {"mail_id": "m" * 2000}},
}


def _outcome(store: SQLiteStore, event: Event, line: bool) -> tuple[str, object]:
    """What became of ``event`` appended after a flat one of its run: raised (its type and
    message) or stored (every event read back)."""
    flat = _mail_event(0, "r0")
    try:
        if line:
            with store.batch():
                write_all(store, [AppendEvent(flat), AppendEvent(event), AppendEvent(flat)])
        else:  # alone: each a row of its own, checked as it always was (encode_row)
            for one in (flat, event, flat):
                store.append_event(one)
    except Exception as exc:  # (the outcome compared, whatever it is)
        return "raised", (type(exc), str(exc).replace(str(store.path), "STORE"))
    again = SQLiteStore(store.path)
    try:
        return "stored", [s.event for s in again.events_after(0)]
    finally:
        again.close()


@pytest.mark.parametrize("odd", list(_ODD_MAIL_EVENTS.values()), ids=list(_ODD_MAIL_EVENTS))
def test_an_odd_mail_event_in_a_line_fares_as_a_row_of_its_own(
    tmp_path: Path, odd: dict[str, object]
) -> None:
    """A mail's event with one odd field, held in a line of a batch beside flat ones, is
    refused with the same error, or stored and read back the same, as it is written alone
    as a row of its own (checked by ``encode_row``): nothing a held event's shortcut takes
    is refused or changed by the row's check. Seen failing (sessions 26 and 29,
    flat events held unencoded) with its check's finite time and key type left out."""
    fields = {**_fields(_mail_event(1, "r0")), **odd}
    event = Event(**fields)  # type: ignore[arg-type]
    alone = SQLiteStore(tmp_path / "alone.db")
    lined = SQLiteStore(tmp_path / "lined.db")
    try:
        assert _outcome(lined, event, line=True) == _outcome(alone, event, line=False)
    finally:
        alone.close()
        lined.close()


_EDGE_TIMES = (0.1, -0.0, 5e-324, 1.7976931348623157e308, -1.2345678901234567e-300, 1e22)
_EDGE_DATA = (
    {},
    {"": ""},
    {"mail_id": "\x00\x01\x1f\x7f", "q": '"\\/<>&'},
    {"k\n": "\t\r\b\f", "u": "\\u0041"},
    {"mail_id": "x" * (FLAT_CHARS - 8)},  # (at the bound with its key: flat)
    {f"k{i}": str(i) for i in range(20)},  # (the order of many keys)
)


def _edge_events() -> list[Event]:
    """Flat events (every one held unencoded) at their edges: times that print long or
    signed, data of control characters, quotes, backslashes, empty keys, many keys, the
    longest flat; runs with a parent or not, fields not ASCII (the group's run fields are
    encoded as any group's), a deep depth; two runs interleaved, so each is a group row."""
    out = []
    for i in range(2 * len(_EDGE_TIMES) * len(_EDGE_DATA)):
        run = ("r\u00e9", "r0")[i % 2]
        out.append(
            Event(
                kind=(EventKind.MAIL_SENT, EventKind.MAIL_DELIVERED)[i % 2],
                run_id=run,
                agent=f"agent \u00e9 {run}",
                root_run_id="r0",
                parent_run_id=None if run == "r0" else "r0",
                depth=0 if run == "r0" else 2**62,
                ts=_EDGE_TIMES[i % len(_EDGE_TIMES)],
                data=_EDGE_DATA[i % len(_EDGE_DATA)],
            )
        )
    return out


def test_flat_events_held_unencoded_read_back_exactly_as_rows_of_their_own(
    tmp_path: Path,
) -> None:
    """Flat events at their edges (``_edge_events``), written as a line of writes in one
    batch (held unencoded, encoded in one call per run when sent) and each as a row of its
    own: the same events read back, every field equal, each time to its bits (``-0.0``
    kept), in the order written, numbered alike. Seen failing (review of e-durable21) with
    a flat group's times encoded to 15 digits, and with every event of a flat group given
    its first event's data."""
    events = _edge_events()
    assert all(flat_event_reads_back(event) for event in events)
    with _rows_and_grouped(tmp_path) as (rows, grouped):
        for event in events:
            rows.append_event(event)
        with grouped.batch():
            write_all(grouped, [AppendEvent(event) for event in events])
        assert grouped.events_after(0, limit=1000) == rows.events_after(0, limit=1000)
        read = [stored.event for stored in grouped.events_after(0, limit=1000)]
        assert read == events
        assert [struct.pack("<d", e.ts) for e in read] == [struct.pack("<d", e.ts) for e in events]
        assert [list(e.data) for e in read] == [list(e.data) for e in events]
        for run_id in ("r0", "r\u00e9"):
            assert grouped.events(run_id) == [e for e in events if e.run_id == run_id]
        groups = sqlite3.connect(grouped.path).execute(
            "SELECT count(*) FROM events WHERE kind = 'events'"
        )
        assert groups.fetchone()[0] == 2  # (two runs, a group row each: the flat path taken)
