"""The checks that let ``encode_row`` skip its decode (store/row_checks.py) say a record
reads back only when it does, and say so for the records the runtime writes per mail."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from subagents.messages import Event, EventKind, Mail, MailState
from subagents.store.row_checks import (
    FIELDS,
    FLAT_CHARS,
    READS_BACK,
    SURE_EVENT_BYTES,
    flat_event_reads_back,
)
from subagents.store.sqlite_tx import encode_row


class _Str(str):
    pass


def _event(**fields: Any) -> Event:
    base: dict[str, Any] = {
        "kind": EventKind.MAIL_SENT,
        "run_id": "r1",
        "agent": "pinger",
        "root_run_id": "root",
        "parent_run_id": "root",
        "depth": 1,
        "ts": time.time(),
        "data": {"mail_ids": ["m1"], "recipient": "r2", "count": 1},
    }
    base.update(fields)
    return Event(**base)


def _mail(**fields: Any) -> Mail:
    base: dict[str, Any] = {
        "mail_id": "m1",
        "sender": "r1",
        "recipient": "r2",
        "content": "ping",
        "sender_agent": "pinger",
        "reply_to": None,
        "sent_at": time.time(),
        "state": MailState.DELIVERED,
        "request_id": "q1",
    }
    base.update(fields)
    return Mail(**base)


_BAD_OR_ODD: list[tuple[str, Any]] = [
    ("ts", float("nan")),
    ("ts", float("inf")),
    ("ts", 5),  # an int for a float: reads back, but only the decode can say so
    ("run_id", 7),
    ("run_id", None),
    ("run_id", _Str("r1")),
    ("agent", b"pinger"),
    ("parent_run_id", 3),
    ("depth", True),
    ("depth", "1"),
    ("depth", 2**70),
    ("kind", "mail_sent"),
    ("kind", "no such kind"),
    ("data", [1, 2]),
    ("data", {1: float("nan")}),
]

_MAIL_BAD_OR_ODD: list[tuple[str, Any]] = [
    ("sent_at", float("nan")),
    ("sent_at", float("-inf")),
    ("sent_at", 0),
    ("content", 5),
    ("content", None),
    ("content", _Str("x")),
    ("mail_id", ["m1"]),
    ("sender_agent", 1),
    ("reply_to", 2.5),
    ("state", "read"),
    ("state", "bogus"),
    ("request_id", {}),
    ("topic", 3),
]


def _reads_back(obj: Any) -> bool:
    try:
        msgspec.json.decode(msgspec.json.encode(obj), type=type(obj))
    except (TypeError, msgspec.EncodeError, msgspec.ValidationError, OverflowError):
        return False
    return True


@pytest.mark.parametrize(
    ("kind", "make", "odd"), [(Event, _event, _BAD_OR_ODD), (Mail, _mail, _MAIL_BAD_OR_ODD)]
)
def test_a_record_is_sure_only_when_it_reads_back(kind: type, make: Any, odd: Any) -> None:
    """Sure means it reads back: each odd record that would not is not taken as sure."""
    check = READS_BACK[kind]

    def sure(record: Any) -> bool:  # (asked by encode_row only of what it encoded)
        try:
            raw = msgspec.json.encode(record)
        except TypeError:
            return False
        return check(record, raw)

    assert sure(make()), "the records written per mail take the fast check"
    assert sure(make(parent_run_id=None) if kind is Event else make(reply_to="m0", topic="t"))
    refused = 0
    for field, value in odd:
        record = make(**{field: value})
        if not _reads_back(record):
            refused += 1
            assert not sure(record), f"{kind.__name__}.{field} = {value!r} taken as sure"
    assert refused >= 8  # (the cases do test the check)


@pytest.mark.parametrize("field_value", _BAD_OR_ODD)
def test_encode_row_refuses_what_does_not_read_back_and_keeps_what_does(
    field_value: tuple[str, Any],
) -> None:
    """Each odd record is decoded as before: refused if it would not read back, written
    if it would (an int for a float, a str subclass, ...)."""
    field, value = field_value
    event = _event(**{field: value})
    decoder = msgspec.json.Decoder(Event)
    if _reads_back(event):
        assert decoder.decode(encode_row(event, decoder, "an event")) is not None
    else:
        with pytest.raises((ValueError, OverflowError), match=r"."):
            encode_row(event, decoder, "an event")


def test_a_nan_timestamp_is_refused_with_its_reason() -> None:
    decoder = msgspec.json.Decoder(Mail)
    with pytest.raises(ValueError, match=r"cannot store mail m1: .*NaN and infinite"):
        encode_row(_mail(sent_at=float("nan")), decoder, "mail m1")


def test_each_check_knows_every_field_of_its_record() -> None:
    """A field added to a record fails here until its check looks at it too."""
    for kind, fields in FIELDS.items():
        assert frozenset(kind.__struct_fields__) == fields, kind.__name__
    assert set(FIELDS) == set(READS_BACK)


def _nested(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_an_event_nested_deeper_than_the_decoder_goes_is_not_sure() -> None:
    """A tool call's input is the model's JSON, in its event's data: msgspec's decoder
    gives up a few levels sooner than its encoder, so an event nested just so deep was
    taken as sure (every field of its type, ``data`` a dict), written, and then no read of
    the run's events decoded it. Such an event is decoded in ``encode_row`` (and refused)."""
    decoder = msgspec.json.Decoder(Event)
    encoder = msgspec.json.Encoder()
    unreadable = 0
    for levels in range(1100, 800, -1):
        event = _event(data={"input": _nested(levels)})
        try:
            raw = encoder.encode(event)
        except RecursionError:
            continue
        try:
            decoder.decode(raw)
        except RecursionError:
            unreadable += 1
            assert not READS_BACK[Event](event, raw), f"nested {levels} deep taken as sure"
    assert unreadable, "msgspec decodes as deep as it encodes now: nothing to refuse"


def test_an_event_too_deep_to_encode_is_refused_with_its_name() -> None:
    decoder = msgspec.json.Decoder(Event)
    with pytest.raises(ValueError, match=r"cannot store an event: .*recursion"):
        encode_row(_event(data={"input": _nested(5000)}), decoder, "an event")
    deep = _event(data={"input": _nested(600)})  # (decoded in encode_row: not sure)
    assert decoder.decode(encode_row(deep, decoder, "an event")) == deep


_FLAT = {"mail_id": "m1", "recipient": "r2"}
"""A straight mail's event's data: ids."""


@pytest.mark.parametrize("field_value", _BAD_OR_ODD)
def test_an_odd_flat_event_is_not_taken_as_flat(field_value: tuple[str, Any]) -> None:
    """The flat check (an event held unencoded, encoded when its batch is sent) says sure
    only of what reads back: each odd field that would not is not flat. Seen failing with
    the finite time's check left out (a NaN taken as flat)."""
    field, value = field_value
    event = _event(**{"data": _FLAT, field: value})
    if not _reads_back(event):
        assert not flat_event_reads_back(event), f"{field} = {value!r} taken as flat"


@pytest.mark.parametrize(
    "data",
    [
        pytest.param({"mail_id": "m\ud800"}, id="a lone surrogate: msgspec cannot encode it"),
        pytest.param({"text": "é"}, id="not ascii"),
        pytest.param({"count": 1}, id="an int"),
        pytest.param({"ids": ["m1"]}, id="a list"),
        pytest.param({"x": None}, id="None"),
        pytest.param({1: "x"}, id="a key not a str"),
        pytest.param({"x": _Str("y")}, id="a str subclass"),
        pytest.param({"blob": "x" * FLAT_CHARS}, id="longer than FLAT_CHARS"),
    ],
)
def test_only_a_flat_data_of_ascii_strings_is_flat(data: dict[Any, Any]) -> None:
    """Flat means one level of ASCII strings: nothing the encoder could refuse when the
    batch is sent (a lone surrogate raises there, failing every write sent with it), nor
    nest. Seen failing with ``isascii`` left out (the surrogate taken as flat)."""
    assert flat_event_reads_back(_event(data=_FLAT))
    assert not flat_event_reads_back(_event(data=data))


def test_the_longest_flat_event_encodes_within_the_sure_bytes() -> None:
    """A flat event is held as a short one is (a long one is a row of its own: its failure
    named alone, tests/store/test_store_deferred.py): at ``FLAT_CHARS`` of the characters
    that encode longest, in the longest kind, it still encodes within ``SURE_EVENT_BYTES``.
    Seen failing with the bound at twice ``FLAT_CHARS``."""
    longest = max(EventKind, key=lambda kind: len(kind.value))
    items = (FLAT_CHARS - 2) // 2
    data = {chr(1) * (items - 1): "\x02" * (FLAT_CHARS - items - 1)}
    event = _event(kind=longest, ts=-1.2345678901234567e-300, data=data)
    assert flat_event_reads_back(event)
    assert len(msgspec.json.encode((event.kind, event.ts, event.data))) <= SURE_EVENT_BYTES
