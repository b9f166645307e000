"""The link's frames (``cluster/wire.py``): our messages go as msgpack of their direction's
type and come back equal, of the same types; a frame msgpack would not give back as it was
goes pickled, and a pickle from an older peer is read. No Ray, no socket: bytes only."""

from __future__ import annotations

import multiprocessing
import pickle
from typing import Any

import msgspec
import pytest

from subagents.actors.remote import Answer, Asked, RememberedRules, Told
from subagents.cluster.link import (
    ANSWERS,
    DEFINITIONS,
    EFFECTS,
    TO_DRIVER,
    TO_NODE,
    LinkEnd,
    LinkError,
)
from subagents.definitions.spec import AgentSpec
from subagents.messages import (
    Ask,
    Batch,
    ChildDone,
    Outcome,
    RunFinished,
    RunRecord,
    RunStatus,
    StepTaken,
    Usage,
)
from subagents.supervision.effects import StartRun, StopAgent, Tell

PICKLED = 0x80
WAIT_S = 30.0


def _start(run_id: str) -> StartRun:
    record = RunRecord(
        run_id=run_id,
        agent="worker",
        task="part 1",
        parent_run_id="p",
        root_run_id="p",
        depth=1,
        status=RunStatus.RUNNING,
    )
    return StartRun(record=record, spec=AgentSpec(name="worker", description="d"), deadline=9.5)


def _round_trip(frames: Any, frame: Any) -> tuple[bytes, Any]:
    data = frames.pack(frame)
    return data, frames.unpack(data)


def test_a_nodes_reports_go_as_msgpack_and_come_back_equal_of_the_same_types() -> None:
    ended = Batch(
        (
            StepTaken(run_id="c1", step=1, usage=Usage(input_tokens=3, model_calls=1)),
            RunFinished(run_id="c1", result="done", attempt=1),
        )
    )
    frame = [Told(ended), Asked(7, Ask(RunFinished(run_id="c2", error="x"))), Told(ended)]
    data, back = _round_trip(TO_DRIVER, frame)
    assert data[0] != PICKLED  # msgpack, not the pickle
    assert back == frame
    assert [type(item) for item in back] == [Told, Asked, Told]
    assert type(back[0].message.messages[1]) is RunFinished
    assert TO_DRIVER.unpack(TO_DRIVER.pack([])) == []  # a beat: an empty frame


def test_the_drivers_effects_go_as_msgpack_and_come_back_equal_of_the_same_types() -> None:
    done = ChildDone(request_id="p:0", outcome=Outcome(run_id="c0", status=RunStatus.COMPLETED))
    frame = (EFFECTS, 4, [_start("c1"), Tell("p", Batch((done,))), StopAgent("c0")])
    data, back = _round_trip(TO_NODE, frame)
    assert data[0] != PICKLED
    assert back == frame and type(back) is tuple
    assert type(back[2][0].record) is RunRecord and back[2][0].record.status is RunStatus.RUNNING
    assert type(back[2][1].message.messages[0].outcome.status) is RunStatus


def _needs_cloudpickle() -> None:
    """What msgpack cannot carry goes by Ray's cloudpickle (``cluster/travel.py``): a bare
    clone's test command has no Ray, and no cluster either."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]'")


def test_what_msgpack_would_not_give_back_as_it_was_goes_pickled_and_comes_back_whole() -> None:
    """A field typed ``Any`` holding a tuple, a Struct, a set or a local function would come
    back a list, a dict, a list or not at all: the frame goes pickled instead."""
    _needs_cloudpickle()

    def local() -> str:
        return "here"

    for value in [(1, 2), RememberedRules("r"), {"a", "b"}, local]:
        frame = (ANSWERS, 0, [Answer(1, value=value)])
        data, back = _round_trip(TO_NODE, frame)
        assert data[0] == PICKLED, value
        got = back[2][0].value
        assert type(got) is type(value)
        if value is not local:
            assert got == value
    plain = (ANSWERS, 0, [Answer(2, value=["x", {"n": 1}])])  # plain data: msgpack
    data, back = _round_trip(TO_NODE, plain)
    assert data[0] != PICKLED and back == plain


def test_a_definitions_frame_and_an_older_peers_pickle_are_read() -> None:
    specs = [AgentSpec(name="worker", description="d", tools=("Read",))]
    data, back = _round_trip(TO_NODE, (DEFINITIONS, 2, specs))
    assert data[0] == PICKLED and back == (DEFINITIONS, 2, specs)  # not of the frame's type
    older = [Told(RunFinished(run_id="c1", result="done"))]
    assert TO_DRIVER.unpack(pickle.dumps(older, protocol=5)) == older


def test_a_frame_that_does_not_decode_as_its_type_is_an_error_not_a_wrong_value() -> None:
    bad = msgspec.msgpack.encode([{"type": "Told", "message": {"type": "Nope"}}])
    with pytest.raises(ValueError, match=r"could not be read .*Nope"):
        TO_DRIVER.unpack(bad)


def test_a_value_msgpack_cannot_take_whatever_it_raises_goes_pickled() -> None:
    """A list that holds itself (msgspec: ``RecursionError``) and a mapping whose ``==``
    raises: the frame goes pickled, as every frame did before, not an error of the send."""
    _needs_cloudpickle()
    itself: list[Any] = []
    itself.append(itself)

    class Strict(dict[str, int]):
        def __eq__(self, other: object) -> bool:
            raise RuntimeError("not comparable")

        __hash__ = None  # type: ignore[assignment]

    for value in [itself, Strict(a=1)]:
        data, back = _round_trip(TO_NODE, (ANSWERS, 0, [Answer(1, value=value)]))
        assert data[0] == PICKLED
        got = back[2][0].value
        assert type(got) is type(value)
    assert got.keys() == {"a"} and itself[0] is itself


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc1", b"\x80\x05\x95garbage", msgspec.msgpack.encode([[1, 2]])],
    ids=["empty", "not msgpack", "a cut pickle", "not a frame's type"],
)
def test_a_frame_that_cannot_be_read_is_a_link_error_naming_it(data: bytes) -> None:
    """Whatever the codec raises, the reader gets a ``LinkError`` (the link's loss, handled
    by its reader), never another exception that would end the reading thread and leave the
    link neither read nor declared lost."""
    ours, theirs = multiprocessing.Pipe()
    end = LinkEnd(ours, "node host n1", sends=TO_NODE, receives=TO_DRIVER)
    try:
        theirs.send_bytes(data)
        with pytest.raises(LinkError, match=f"node host n1 closed: a frame of {len(data)} bytes"):
            end.receive(timeout=WAIT_S)
    finally:
        end.close()
        theirs.close()


def test_every_question_a_node_asks_the_driver_goes_as_msgpack() -> None:
    """Each message a node host asks of the driver (``Asked.message``) must be in the typed
    union, or it goes pickled (slower, and outside the one encoding): the node's lease
    question (``LeaseLeft``, cluster/node_lease.py) and the senders' records included."""
    from subagents.actors.remote import LeaseLeft, RecordMails

    for question in (LeaseLeft(), RecordMails(mails=()), RememberedRules("r")):
        data, back = _round_trip(TO_DRIVER, [Asked(1, question)])
        assert data[0] != PICKLED, question
        assert back == [Asked(1, question)]
        assert type(back[0].message) is type(question)
