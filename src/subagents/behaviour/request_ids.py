"""The request ids of an LLM run's tool calls: the call's tool_use id and the turn that made it.

A call handed to the supervisor (a spawn, a mail, a stop, a ``fan_out``'s children, an
approval asked of the parent) goes under a request id; its answers come back under it, and
a run resumed after a crash or a restart is handed the work its calls already did by it (a
child's ``RunRecord.request_id``, a mail's ``Mail.request_id``: ``supervision/resumption``).

Why the turn: the Messages API does not promise tool_use ids unique across turns (a buggy or
hostile backend, a proxy, may give a later turn's call an id it gave before). With the
tool_use id alone, a run resumed in such a later turn took the earlier call's child, its
outcome or its mail as its call's: the later child never spawned and the earlier one's
answer given instead, the later mail never sent, the later approval never asked
(tests/durability/test_repeated_ids_crash.py). ``retries``: a retry starts a run from
scratch, its turns counted again.

The forms (one grammar, read back here): a call ``TOOLUSEID@RETRIES.STEP``; a ``fan_out``
child ``CALL#fanINDEX`` (``fan_out_tool``); an approval asked of the parent
``approve:CALL`` (``parent_approvals``).

Older stores: a request id made before ids named the turn is the tool_use id alone (no
``@``). A run resumed from such a store takes that work as its resumed turn's (what it meant
when made: ``this_turn``), and a child of such a request still running answers under it
(``use_id_of`` reads it as the tool_use id). Real tool_use ids hold no ``@``
(``toolu_`` and letters and digits).

A tool_use id holding anything else (a hostile or buggy backend's ``approve:X``, ``Y#fan0``,
``a@0.1``) is written in a request id escaped (``~`` and its UTF-8 in URL-safe base64,
``_written``): else a send under ``approve:X`` read as the approval asked for the call
``X`` (its acknowledgement taken as that approval's: the parent's reply to the model's own
mail approved ``X``, the send never answered), a spawn under ``Y#fan0`` as a fan_out's
child (never answered), and a resumed fan_out under ``approve:X`` lost its children's work
(tests/behaviour/test_hostile_tool_ids.py).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from subagents.messages import ToolUseBlock

TURN = "@"
FAN_OUT_CHILD = "#fan"
APPROVAL = "approve:"
ESCAPED = "~"
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
"""What a real tool_use id is made of (the Messages API's pattern): written as it is."""


def of_call(use_id: str, retries: int, step: int) -> str:
    """The request id of the call ``use_id`` made at ``step`` of retry ``retries``."""
    return f"{_written(use_id)}{TURN}{retries}.{step}"


def use_id_of(call: str) -> str:
    """The tool_use id a call's request id names (an older store's: the id itself)."""
    written, turn, _ = call.rpartition(TURN)
    if not turn:
        return call
    if written.startswith(ESCAPED):
        try:
            payload = written[1:]
            text = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            return text.decode("utf-8", "surrogatepass")
        except (binascii.Error, UnicodeDecodeError):
            pass  # (not one ``_written`` made: an older store's id, as it is)
    return written


def _written(use_id: str) -> str:
    """``use_id`` as a request id holds it: as it is when it is plain (every real one), else
    escaped, so that no tool_use id reads as another form (an approval's, a fan_out
    child's) nor as another call's."""
    if _PLAIN.fullmatch(use_id):
        return use_id
    data = use_id.encode("utf-8", "surrogatepass")
    return ESCAPED + base64.urlsafe_b64encode(data).decode().rstrip("=")


def this_turn(
    recovered: Iterable[Any], uses: Sequence[ToolUseBlock], retries: int, step: int
) -> tuple[tuple[Any, ...], set[str]]:
    """What of ``recovered`` (``resumption.recovered_messages``) answers the calls ``uses``
    of the turn a run resumes in (``step``), and the tool_use ids of those whose effect
    happened (a spawn or a mail: not made again).

    An answer to a call of another turn is left out, whatever its tool_use id. One an older
    store recorded under a tool_use id alone is taken as the call of that id in this turn
    and given its request id."""
    ours = {of_call(u.id, retries, step) for u in uses}
    bare = {u.id for u in uses}
    kept: list[Any] = []
    done: set[str] = set()
    for message in recovered:
        request_id = getattr(message, "request_id", None)
        if request_id is None:  # (a function agent's Replay: an LLM run has none)
            kept.append(message)
            continue
        prefix = APPROVAL if request_id.startswith(APPROVAL) else ""
        call, child, index = request_id[len(prefix) :].partition(FAN_OUT_CHILD)
        if call not in ours:
            if TURN in call or call not in bare:
                continue  # another turn's call
            call = of_call(call, retries, step)  # an older store's
            message = msgspec.structs.replace(message, request_id=prefix + call + child + index)
        kept.append(message)
        if not prefix and not child:
            done.add(use_id_of(call))
    return tuple(kept), done
