"""The bytes the link between a supervisor and its node hosts carries: frames of the
runtime's own messages (effects one way; what agents told and asked the other way), as
msgpack by msgspec, or pickled when a frame holds what msgpack cannot give back as it was.

Why msgspec: every message on the link is one of ours, a msgspec Struct, and the project's
messages are msgspec's (docs/architecture.md). msgspec's msgpack encodes and decodes them in
C; the C ``pickle`` rebuilds each ``kw_only`` Struct through a Python call with a dict of
its fields (``msgspec._utils.rebuild``), and nearly all of our messages are ``kw_only``.
Measured on the frames of the 1,000-child fan-out (benchmarks/README.md, "Session 30
(e-fanout21)"): a frame of four children's end reports 31.6 us to pickle and 22.9 us to
unpickle, 2.8 us to encode and 5.9 us to decode (per child, with the sender's check below:
14.0 us pickled, 5.1 us as msgpack); a frame of 100 starts 18.0 us per child pickled, 8.1 us
as msgpack.

What msgpack cannot give back as it was goes pickled, whole frame: a value of a field typed
``Any`` (an answer's value, a journal entry's result) that is a tuple, a Struct, a set or
anything but plain data would come back as a list, a dict, or not at all. So the sender
decodes what it encoded, with the receiver's type (``Frames``), and sends the msgpack only
when that equals the frame; else (or when msgpack refuses it) the pickle, as before. The
receiver tells the two apart by the first byte: a pickle starts with its protocol opcode
(0x80), which no frame's msgpack does (a frame is an array, never an empty map).

What the check does not see, under an ``Any`` field (``RunRecord.shared``, a tool call's
``input``, an answer's ``value``...): a value that equals what msgpack gives back but is not
of its type arrives as that plain value: an ``IntEnum`` or ``str`` enum member as its int or
str, a subclass of ``dict`` or ``list`` as a ``dict`` or ``list``, a ``bytearray`` as
``bytes``, a datetime of another zone as the same instant in UTC; and a list held twice in a
frame arrives as two equal lists. These fields hold JSON-like data (the store keeps them as
JSON, where such values fare worse: a datetime comes back a string), and none of the
runtime's own messages holds such a value there. A type-exact check was measured on the
fan-out's frames and left out: comparing the ``repr`` costs ~2.7x the codec itself; walking
the ``Any`` fields (a plan per Struct type) ~0.5x, a fifth of what msgpack saves.

An item the C pickle refuses (a value that is a local function, say, in an answer) is
pickled with cloudpickle instead (``travel.dumps``), whose output the C ``pickle.loads``
reads as well.
"""

from __future__ import annotations

import pickle
from typing import Any

import msgspec

PROTOCOL = 5
_PICKLED = b"\x80"
"""The first byte of every pickle of protocol 2 or later (``PROTO``)."""
_ENCODE = msgspec.msgpack.Encoder().encode


class Frames:
    """The frames of one direction of the link: ``frame_type``, the msgspec type every frame
    that goes as msgpack is decoded as (``None``: every frame pickled)."""

    def __init__(self, frame_type: Any = None) -> None:
        self._decode = None if frame_type is None else msgspec.msgpack.Decoder(frame_type).decode

    def pack(self, frame: Any) -> bytes:
        """``frame`` as bytes for the other end: msgpack if it comes back equal, else a pickle."""
        decode = self._decode
        if decode is not None:
            try:
                data = _ENCODE(frame)
                if decode(data) == frame:
                    return data
            except Exception:  # whatever msgpack cannot do (a value nested past its depth,
                pass  # one that holds itself, one whose ``==`` raises...): pickled, as before
        return pack(frame)

    def unpack(self, data: bytes) -> Any:
        """What ``pack`` made ``data`` of (a pickle from an older peer too). A frame that
        cannot be read is a ``ValueError`` saying so (the link takes it as its loss, whatever
        the codec raised: a reader that died of it would leave the link neither read nor
        declared lost)."""
        try:
            if self._decode is None or data[:1] == _PICKLED:
                return pickle.loads(data)  # our own node hosts' and supervisor's, never a user's
            return self._decode(data)
        except Exception as exc:
            raise ValueError(
                f"a frame of {len(data)} bytes could not be read ({type(exc).__name__}: {exc})"
            ) from exc


def pack(items: Any) -> bytes:
    """``items`` pickled for the other end of the link."""
    try:
        return pickle.dumps(items, protocol=PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        from subagents.cluster.travel import dumps

        return dumps(items)


def unpack(data: bytes) -> Any:
    """What ``pack`` made ``data`` of."""
    return pickle.loads(data)  # bytes from our own node hosts and supervisor, never a user's
