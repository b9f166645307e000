"""The two ends of the link between a supervisor and a node's agents, in one process: the
order of batches, the router's bookkeeping of which node hosts which run, and asks answered
through the outbox. No Ray: what carries the items is a plain function here."""

from __future__ import annotations

import random
import socket
import threading
import time
from typing import Any

import pykka
import pytest

from subagents.actors.remote import Answer, Asked, Outbox, RemoteSupervisor, RoutingEffector, Told
from subagents.actors.timer import TimerService
from subagents.cluster.node_host import InOrder
from subagents.definitions.spec import AgentSpec
from subagents.messages import Batch, Placed, RunRecord
from subagents.supervision.effects import Effect, Publish, StartRun, StopAgent, Tell

WAIT_S = 30.0


def test_batches_are_released_in_their_order_whatever_order_they_arrive_in() -> None:
    order = InOrder()
    assert order.arrived(2, ["b"]) == []
    assert order.arrived(3, ["c"]) == []
    assert order.arrived(1, ["a"]) == [["a"], ["b"], ["c"]]
    assert order.arrived(4, ["d"]) == [["d"]]
    assert order.applied == 4
    with pytest.raises(ValueError, match="batch 3 arrived twice"):
        order.arrived(3, ["again"])


def _start(run_id: str, parent: str | None = None, attempt: int = 1) -> StartRun:
    record = RunRecord(
        run_id=run_id,
        agent="worker",
        task="t",
        parent_run_id=parent,
        root_run_id=parent or run_id,
        depth=1 if parent else 0,
    )
    spec = AgentSpec(name="worker", description="d")
    return StartRun(record=record, spec=spec, deadline=0.0, attempt=attempt)


class Wire:
    """Records what the router sends, and places runs by a fixed rule."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Effect]]] = []
        self.ended: list[str] = []
        self.placed: list[tuple[str, str | None]] = []

    def place(self, start: StartRun, parent_node: str | None) -> str:
        node = parent_node or ("n1" if start.record.run_id.endswith("1") else "n2")
        self.placed.append((start.record.run_id, parent_node))
        return node

    def send(self, node: str, effects: list[Effect]) -> None:
        self.sent.append((node, list(effects)))


@pytest.fixture
def router() -> Any:
    timer = TimerService()
    wire = Wire()
    published: list[Any] = []
    effector = RoutingEffector(
        place=wire.place,
        send=wire.send,
        on_ended=wire.ended.append,
        supervisor=None,
        timer=timer,
        behaviour_for=lambda spec: None,
        on_outside=lambda m: None,
        on_event=published.append,
        pool=None,
    )
    yield effector, wire, published
    timer.stop()


def test_a_child_follows_its_parent_and_tells_follow_their_run(router: Any) -> None:
    effector, wire, _ = router
    effector.apply([_start("r1"), _start("r2")])
    effector.apply([_start("c1", parent="r2"), Tell("c1", "hello"), Tell("r1", "hi")])
    assert wire.placed == [("r1", None), ("r2", None), ("c1", "n2")]
    assert [(node, [type(e).__name__ for e in effects]) for node, effects in wire.sent] == [
        ("n1", ["StartRun"]),
        ("n2", ["StartRun"]),
        ("n2", ["StartRun", "Tell"]),
        ("n1", ["Tell"]),
    ]
    assert effector.node_of("c1") == "n2"


class ToldHere:
    """The supervisor's ``tell``, heard at once, in one log with what the router sends."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    def tell(self, message: Any) -> None:
        self.log.append(("told", message))


def test_the_starts_of_one_apply_are_told_placed_in_one_message_before_they_are_sent() -> None:
    log: list[tuple[str, Any]] = []
    timer = TimerService()
    effector = RoutingEffector(
        place=lambda start, parent: parent or start.record.run_id[-1:].replace("r", "n"),
        send=lambda node, effects: log.append(("sent", node)),
        on_ended=lambda node: None,
        address_of=lambda node: f"10.0.0.{node[-1:]}",
        supervisor=ToldHere(log),
        timer=timer,
        behaviour_for=lambda spec: None,
        on_outside=lambda m: None,
        on_event=lambda m: None,
        pool=None,
    )
    try:
        effector.apply([_start("r1"), _start("r2"), _start("c1", parent="1"), Tell("r1", "hi")])
        effector.apply([_start("r3")])
    finally:
        timer.stop()
    placed = [
        Placed(run_id="r1", attempt=1, node="1", address="10.0.0.1"),
        Placed(run_id="r2", attempt=1, node="2", address="10.0.0.2"),
        Placed(run_id="c1", attempt=1, node="1", address="10.0.0.1"),
    ]
    assert log == [
        ("told", Batch(tuple(placed))),  # one message, in the starts' order, before any send
        ("sent", "1"),
        ("sent", "2"),
        ("told", Placed(run_id="r3", attempt=1, node="3", address="10.0.0.3")),  # alone: bare
        ("sent", "3"),
    ]


def test_effects_for_no_node_stay_here_and_tells_to_unknown_runs_are_dropped(router: Any) -> None:
    effector, wire, published = router
    event: Any = object()
    effector.apply([Publish(event), Tell("nobody", "x"), StopAgent("nobody")])
    assert published == [event]
    assert wire.sent == []


def test_a_stop_or_an_end_frees_the_node_once_and_a_late_end_of_an_old_start_does_not(
    router: Any,
) -> None:
    effector, wire, _ = router
    effector.apply([_start("r1"), _start("r2")])
    effector.apply([StopAgent("r1")])
    assert wire.sent[-1] == ("n1", [StopAgent("r1")])
    assert wire.ended == ["n1"]
    effector.apply([_start("r2", attempt=2)])  # a restart: the earlier start is stopped
    assert wire.ended == ["n1", "n2"]
    assert ("n2", [StopAgent("r2")]) in wire.sent
    effector.ended("r2", 1)  # the first start's late report: not this start
    assert effector.node_of("r2") == "n2"
    effector.ended("r2", 2)
    assert effector.node_of("r2") is None
    assert wire.ended == ["n1", "n2", "n2"]


def test_a_lost_node_lists_the_runs_started_there_once(router: Any) -> None:
    effector, wire, _ = router
    effector.apply([_start("r1"), _start("r2"), _start("c1", parent="r1")])
    forgotten: list[str] = []
    assert sorted(effector.lost("n1", lambda: forgotten.append("n1"))) == ["c1", "r1"]
    assert forgotten == ["n1"]
    assert effector.lost("n1") == []
    assert effector.node_of("r2") == "n2"
    effector.apply([Tell("r1", "to a run of the lost node")])
    assert all(
        node != "n1" or effects != [Tell("r1", "to a run of the lost node")]
        for node, effects in wire.sent
    )


def test_an_ask_through_the_outbox_gets_its_answer_or_its_error() -> None:
    outbox = Outbox()
    told: list[Any] = []
    supervisor = RemoteSupervisor(outbox, on_told=told.append)
    supervisor.tell("report")
    answers: list[Any] = []

    def ask(message: str) -> None:
        try:
            answers.append(supervisor.ask(message, timeout=WAIT_S))
        except pykka.ActorDeadError as exc:
            answers.append(f"error: {exc}")

    asker = threading.Thread(target=ask, args=("step",))
    asker.start()
    first = outbox.take(10, WAIT_S)
    items = first if len(first) == 2 else first + outbox.take(10, WAIT_S)
    assert items[0] == Told("report") and told == ["report"]
    assert isinstance(items[1], Asked) and items[1].message == "step"
    supervisor.answer([Answer(items[1].key, value=True)])
    asker.join(WAIT_S)
    assert answers == [True]

    failing = threading.Thread(target=ask, args=("tool",))
    failing.start()
    asked = outbox.take(10, WAIT_S)[0]
    assert isinstance(asked, Asked)
    supervisor.answer([Answer(asked.key, error="StoreError: disk full")])
    failing.join(WAIT_S)
    assert answers[-1] == "error: StoreError: disk full"


def test_an_ask_left_waiting_when_the_link_closes_is_answered_with_an_error() -> None:
    outbox = Outbox()
    supervisor = RemoteSupervisor(outbox)
    answers: list[str] = []

    def ask() -> None:
        try:
            supervisor.ask("step", timeout=WAIT_S)
        except pykka.ActorDeadError as exc:
            answers.append(str(exc))

    asker = threading.Thread(target=ask)
    asker.start()
    assert isinstance(outbox.take(1, WAIT_S)[0], Asked)
    supervisor.close()
    asker.join(WAIT_S)
    assert answers == ["the node's link to the supervisor closed"]
    with pytest.raises(pykka.ActorDeadError):
        supervisor.ask("after", timeout=WAIT_S)


# ---- the socket between the two ends (cluster.link), in one process --------------------------


class NodeSide:
    """What a node host gives its end of the link: where effects and answers go, and an
    outbox to send from."""

    def __init__(self) -> None:
        self.outbox = Outbox()
        self.delivered: list[tuple[int, list[Any]]] = []
        self.answers: list[Any] = []
        self.changed = threading.Condition()

    def deliver(self, seq: int, effects: list[Any]) -> None:
        with self.changed:
            self.delivered.append((seq, effects))
            self.changed.notify_all()

    def answer(self, answers: list[Any]) -> None:
        with self.changed:
            self.answers.extend(answers)
            self.changed.notify_all()


def test_the_link_carries_effects_in_order_answers_back_and_the_outbox_as_it_fills() -> None:
    from subagents.cluster.link import ANSWERS, EFFECTS, NodeLink, connect

    side = NodeSide()
    node = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    driver = connect(node.address, b"k" * 32, "node host n1")
    try:
        for seq in range(1, 51):
            driver.send((EFFECTS, seq, [Tell("r1", f"m{seq}")]))
        driver.send((ANSWERS, 0, [Answer(7, value="yes")]))
        with side.changed:
            assert side.changed.wait_for(lambda: side.answers, WAIT_S)
        assert [seq for seq, _ in side.delivered] == list(range(1, 51))
        assert side.delivered[-1][1] == [Tell("r1", "m50")]
        assert side.answers == [Answer(7, value="yes")]
        side.outbox.put(Told("first"))
        side.outbox.put(Asked(1, "second"))
        received: list[Any] = []
        while len(received) < 2:
            received.extend(driver.receive())
        assert received == [Told("first"), Asked(1, "second")]
    finally:
        driver.close()
        node.close()
        side.outbox.close()


def test_a_wrong_key_or_no_listener_is_a_link_error_naming_the_address() -> None:
    from subagents.cluster.link import LinkError, NodeLink, connect

    side = NodeSide()
    node = NodeLink(
        "127.0.0.1", b"right" * 8, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    host, port = node.address
    try:
        with pytest.raises(LinkError, match=rf"node host n1 at {host}:{port} refused the link"):
            connect(node.address, b"wrong" * 8, "node host n1")
    finally:
        node.close()
        side.outbox.close()
    with socket.socket() as unused:  # a port bound, never listened on: nobody answers there
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        with pytest.raises(LinkError, match=rf"cannot reach node host n2 at 127.0.0.1:{port} "):
            connect(("127.0.0.1", port), b"right" * 8, "node host n2")


def test_closing_an_end_wakes_its_reader_with_a_link_error() -> None:
    from subagents.cluster.link import LinkError, NodeLink, connect

    side = NodeSide()
    node = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    driver = connect(node.address, b"k" * 32, "node host n1")
    failed: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while True:  # the node's beats (empty frames) until the close
                driver.receive()
        except LinkError as exc:
            failed.append(exc)
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    driver.close()
    assert done.wait(WAIT_S), "a reader blocked in receive was not woken by close"
    reader.join(WAIT_S)
    assert len(failed) == 1 and "the link to node host n1 closed" in str(failed[0])
    node.close()
    side.outbox.close()


def test_a_frame_the_node_cannot_read_ends_the_link_so_the_driver_hears_of_it() -> None:
    """A node host that cannot read the driver's frame stops reading: it closes its end too,
    so the driver's reader hears the link's loss (and fences the host, its runs started
    again elsewhere) instead of beats from a host that no longer takes its effects."""
    from subagents.cluster.link import LinkError, NodeLink, connect

    side = NodeSide()
    node = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    driver = connect(node.address, b"k" * 32, "node host n1")
    try:
        driver.conn.send_bytes(b"\xc1")  # not msgpack, not a pickle
        deadline = time.monotonic() + WAIT_S
        with pytest.raises(LinkError, match="the link to node host n1 closed"):
            while time.monotonic() < deadline:  # beats until the node's end is closed
                driver.receive(timeout=WAIT_S)
        assert side.delivered == []
    finally:
        driver.close()
        node.close()
        side.outbox.close()


def test_link_ports_are_read_from_the_environment_and_a_bad_value_is_named() -> None:
    from subagents.cluster.link import link_ports

    assert link_ports(None) is None and link_ports("  ") is None
    assert link_ports("20000-20010") == (20000, 20010)
    assert link_ports(" 20005 ") == (20005, 20005)
    for bad in ("abc", "10-5", "0-3", "70000", "1-x"):
        with pytest.raises(ValueError, match=r"SUBAGENTS_LINK_PORTS must be a port or a range"):
            link_ports(bad)


LINK_TEST_PORTS = range(20000, 32000)
"""Where :func:`free_port_pair` looks: above the ports a Ray node gives its workers
(10002-19999 by default) and below the kernel's ephemeral range (32768 and up by default,
``/proc/sys/net/ipv4/ip_local_port_range``), from which every outgoing connection and every
``bind(0)`` of every other process on the machine takes ports at any moment: a pair probed
free there could be taken before the test's link listens on it."""


def free_port_pair() -> int:
    """A port P such that P and P + 1 are both free here now, in :data:`LINK_TEST_PORTS`
    (outside the ephemeral range), from a random start so that two test processes probing at
    the same time (xdist workers, parallel runs) do not both pick the same pair."""
    ports = LINK_TEST_PORTS
    start = random.randrange(len(ports) - 1)
    for offset in range(len(ports) - 1):
        base = ports[(start + offset) % (len(ports) - 1)]
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", base))
                b.bind(("127.0.0.1", base + 1))
        except OSError:
            continue
        return base
    raise AssertionError(f"no two free ports in a row in {ports}")


def test_a_node_listens_on_the_first_free_port_of_its_range_or_says_none_is_free() -> None:
    from subagents.cluster.link import LinkError, NodeLink, connect

    side = NodeSide()
    first = free_port_pair()
    with socket.socket() as taken:  # another program holds the first port of the range
        taken.bind(("127.0.0.1", first))
        taken.listen()
        with pytest.raises(LinkError, match=rf"no free port .* SUBAGENTS_LINK_PORTS={first}-"):
            NodeLink(
                "127.0.0.1",
                b"k" * 32,
                deliver=side.deliver,
                answer=side.answer,
                take=side.outbox.take,
                ports=(first, first),
            )
        node = NodeLink(
            "127.0.0.1",
            b"k" * 32,
            deliver=side.deliver,
            answer=side.answer,
            take=side.outbox.take,
            ports=(first, first + 1),
        )
    try:
        assert node.address == ("127.0.0.1", first + 1)
        connect(node.address, b"k" * 32, "node host n1").close()  # it is that node's link
    finally:
        node.close()
        side.outbox.close()


def test_a_node_that_stops_reading_never_holds_up_the_drivers_sends() -> None:
    """The driver's end queues: with the node's reader stuck (a frozen node), 20 MB of frames,
    far past what the sockets buffer, are all handed over at once; they arrive once the node
    reads again, in order."""
    from subagents.cluster.link import EFFECTS, NodeLink, connect

    side = NodeSide()
    stuck = threading.Event()
    arrived: list[int] = []

    def deliver(seq: int, effects: list[Any]) -> None:
        stuck.wait(WAIT_S)  # the first frame holds the node's reader until the test lets go
        with side.changed:
            arrived.append(seq)
            side.changed.notify_all()

    node = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=deliver, answer=side.answer, take=side.outbox.take
    )
    driver = connect(node.address, b"k" * 32, "node host n1")
    payload = "x" * 100_000
    sent = threading.Event()

    def send_all() -> None:
        for seq in range(1, 201):
            driver.send((EFFECTS, seq, [payload]))
        sent.set()

    sender = threading.Thread(target=send_all)
    try:
        sender.start()
        assert sent.wait(WAIT_S), "the driver's sends waited on a node that does not read"
        stuck.set()
        with side.changed:
            assert side.changed.wait_for(lambda: len(arrived) == 200, WAIT_S), len(arrived)
        assert arrived == list(range(1, 201))
    finally:
        stuck.set()
        sender.join(WAIT_S)
        driver.close()
        node.close()
        side.outbox.close()


def test_a_closed_link_leaves_no_writer_thread_behind() -> None:
    """The driver's end, closed while its writer is blocked on a node that does not read,
    has ended that thread when ``close`` returns (a runtime's close left it alive: the
    runtime tests on two nodes failed their teardown, 'threads left behind:
    subagents-link-out')."""
    from subagents.cluster.link import EFFECTS, NodeLink, connect

    side = NodeSide()
    stuck = threading.Event()
    node = NodeLink(
        "127.0.0.1",
        b"k" * 32,
        deliver=lambda _seq, _effects: stuck.wait(WAIT_S),
        answer=side.answer,
        take=side.outbox.take,
    )
    driver = connect(node.address, b"k" * 32, "node host n1")
    writer = driver._writer
    assert writer is not None and writer.is_alive()
    try:
        for seq in range(1, 201):  # far past what the sockets buffer: the writer blocks
            driver.send((EFFECTS, seq, ["x" * 100_000]))
        driver.close()
        assert not writer.is_alive()
    finally:
        stuck.set()
        driver.close()
        node.close()
        side.outbox.close()


# ---- strangers at the node's door, and TLS (cluster.link_gate, cluster.link_tls) ------------


def within(fn: Any, seconds: float = WAIT_S) -> Any:
    """``fn()``'s result or exception, or an AssertionError if it had not returned within
    ``seconds`` (a daemon thread: a hung handshake does not hang the test session)."""
    done = threading.Event()
    box: list[Any] = []

    def call() -> None:
        try:
            box.append(("ok", fn()))
        except BaseException as exc:
            box.append(("error", exc))
        done.set()

    threading.Thread(target=call, daemon=True).start()
    assert done.wait(seconds), f"{fn} did not return within {seconds} s"
    kind, value = box[0]
    if kind == "error":
        raise value
    return value


def drained(sock: socket.socket) -> bytes:
    """What ``sock`` receives until its peer closes it."""
    sock.settimeout(WAIT_S)
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def test_strangers_before_the_driver_do_not_keep_it_out_and_are_logged() -> None:
    """An idle TCP connection (a port scanner, a health probe) and a peer with a wrong key
    reach the node first; the driver still gets in, and frames flow."""
    from structlog.testing import capture_logs

    from subagents.cluster.link import EFFECTS, LinkError, NodeLink, connect

    side = NodeSide()
    node = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    idle = socket.create_connection(node.address, timeout=WAIT_S)
    driver = None
    try:
        with capture_logs() as logs:
            with pytest.raises(LinkError, match=r"refused the link: wrong key"):
                within(lambda: connect(node.address, b"wrong" * 8, "node host n1"))
            driver = within(lambda: connect(node.address, b"k" * 32, "node host n1"))
        driver.send((EFFECTS, 1, [Tell("r1", "through")]))
        with side.changed:
            assert side.changed.wait_for(lambda: side.delivered, WAIT_S)
        assert side.delivered == [(1, [Tell("r1", "through")])]
        dropped = [e for e in logs if e["event"].startswith("a connection to the node host")]
        assert [(e["log_level"], e["reason"].split(" (")[0]) for e in dropped] == [
            ("warning", "wrong key")
        ]
        assert dropped[0]["peer"].startswith("127.0.0.1:")
    finally:
        idle.close()
        if driver is not None:
            driver.close()
        node.close()
        side.outbox.close()


def test_a_flood_of_idle_connections_does_not_keep_the_driver_out() -> None:
    """As many idle connections as the gate handshakes at once reach the node first (a
    flood); the driver's connection makes room by ending the oldest, gets in, and frames
    flow. (Dropping the newest instead kept the driver out for as long as the flood lasted.)"""
    from subagents.cluster.link import EFFECTS, NodeLink, connect
    from subagents.cluster.link_gate import MOST_HANDSHAKES

    side = NodeSide()
    node = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    flood = [socket.create_connection(node.address, timeout=WAIT_S) for _ in range(MOST_HANDSHAKES)]
    driver = None
    try:
        for idle in flood:  # each read its challenge: all are handshakes under way now
            assert idle.recv(1)
        driver = within(lambda: connect(node.address, b"k" * 32, "node host n1"))
        driver.send((EFFECTS, 1, [Tell("r1", "through")]))
        with side.changed:
            assert side.changed.wait_for(lambda: side.delivered, WAIT_S)
        assert side.delivered == [(1, [Tell("r1", "through")])]
        drained(flood[0])  # the oldest was ended to make room (else: a socket timeout)
    finally:
        for idle in flood:
            idle.close()
        if driver is not None:
            driver.close()
        node.close()
        side.outbox.close()


def test_a_connection_silent_past_the_handshake_deadline_is_dropped_and_logged() -> None:
    from structlog.testing import capture_logs

    from subagents.cluster.link import NodeLink, connect

    side = NodeSide()
    with capture_logs() as logs:
        node = NodeLink(
            "127.0.0.1",
            b"k" * 32,
            deliver=side.deliver,
            answer=side.answer,
            take=side.outbox.take,
            handshake_s=0.5,
        )
        idle = socket.create_connection(node.address, timeout=WAIT_S)
        try:
            drained(idle)  # the node's challenge, then its close: it gave up on this one
            where = "{}:{}".format(*idle.getsockname())
        finally:
            idle.close()
        connect(node.address, b"k" * 32, "node host n1").close()  # the driver still gets in
    link = "{}:{}".format(*node.address)
    dropped = [  # this link's, this connection's: a late line of an earlier test's may be here
        e  # too, even from the same client port (the OS may give it again once it is closed)
        for e in logs
        if e["event"].startswith("a connection to the node host")
        and e["peer"] == where
        and e["link"] == link
    ]
    assert [(e["peer"], e["reason"]) for e in dropped] == [
        (where, "no answer to the handshake in time")
    ]
    node.close()
    side.outbox.close()


def _self_signed(folder: Any, name: str) -> tuple[str, str]:
    """A self-signed certificate (its own CA) and its key, as PEM files in ``folder``."""
    import datetime

    crypto = pytest.importorskip("cryptography")
    del crypto
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / f"{name}.crt", folder / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


@pytest.fixture
def tls_files(tmp_path: Any) -> dict[str, str]:
    cert, key = _self_signed(tmp_path, "cluster")
    other_cert, other_key = _self_signed(tmp_path, "intruder")
    return {"cert": cert, "key": key, "other_cert": other_cert, "other_key": other_key}


def test_a_tls_link_carries_frames_both_ways(tls_files: dict[str, str]) -> None:
    from subagents.cluster.link import EFFECTS, NodeLink, connect
    from subagents.cluster.link_tls import link_tls

    tls = link_tls(
        {"SUBAGENTS_LINK_TLS_CERT": tls_files["cert"], "SUBAGENTS_LINK_TLS_KEY": tls_files["key"]}
    )
    assert tls is not None and tls.ca == tls_files["cert"]
    side = NodeSide()
    node = NodeLink(
        "127.0.0.1",
        b"k" * 32,
        deliver=side.deliver,
        answer=side.answer,
        take=side.outbox.take,
        tls=tls,
    )
    driver = within(lambda: connect(node.address, b"k" * 32, "node host n1", tls))
    try:
        for seq in range(1, 201):  # some past a TLS record's 16 KB
            driver.send((EFFECTS, seq, ["x" * (seq * 300)]))
        with side.changed:
            assert side.changed.wait_for(lambda: len(side.delivered) == 200, WAIT_S)
        assert [seq for seq, _ in side.delivered] == list(range(1, 201))
        assert side.delivered[-1][1] == ["x" * 60_000]
        for n in range(50):
            side.outbox.put(Told(f"m{n}"))
        received: list[Any] = []
        while len(received) < 50:
            received.extend(driver.receive())
        assert received == [Told(f"m{n}") for n in range(50)]
    finally:
        driver.close()
        node.close()
        side.outbox.close()


def test_a_plain_peer_or_a_foreign_certificate_is_refused_by_a_tls_link(
    tls_files: dict[str, str],
) -> None:
    from subagents.cluster.link import LinkError, NodeLink, connect
    from subagents.cluster.link_tls import LinkTls

    tls = LinkTls(tls_files["cert"], tls_files["key"], tls_files["cert"], "test")
    foreign = LinkTls(tls_files["other_cert"], tls_files["other_key"], tls_files["cert"], "test")
    side = NodeSide()
    node = NodeLink(
        "127.0.0.1",
        b"k" * 32,
        deliver=side.deliver,
        answer=side.answer,
        take=side.outbox.take,
        tls=tls,
        handshake_s=0.5,
    )
    try:
        with pytest.raises(
            LinkError, match=r"refused the link: closed during the handshake; so ends a link with"
        ):
            within(lambda: connect(node.address, b"k" * 32, "node host n1"))
        with pytest.raises(LinkError, match=r"refused the link: TLS refused"):
            within(lambda: connect(node.address, b"k" * 32, "node host n1", foreign))
        within(lambda: connect(node.address, b"k" * 32, "node host n1", tls)).close()
    finally:
        node.close()
    plain = NodeLink(
        "127.0.0.1", b"k" * 32, deliver=side.deliver, answer=side.answer, take=side.outbox.take
    )
    try:  # and a TLS driver at a plain node
        with pytest.raises(LinkError, match=r"refused the link: TLS refused"):
            within(lambda: connect(plain.address, b"k" * 32, "node host n1", tls))
    finally:
        plain.close()
        side.outbox.close()


def test_the_links_tls_settings_are_read_checked_and_named(tls_files: dict[str, str]) -> None:
    from subagents.cluster.link_tls import link_tls

    cert, key = tls_files["cert"], tls_files["key"]
    assert link_tls({}) is None
    assert link_tls({"RAY_USE_TLS": "0", "RAY_TLS_SERVER_CERT": cert}) is None
    with pytest.raises(ValueError, match=r"SUBAGENTS_LINK_TLS_KEY is not set"):
        link_tls({"SUBAGENTS_LINK_TLS_CERT": cert})
    with pytest.raises(ValueError, match=r"SUBAGENTS_LINK_TLS_CERT is not set"):
        link_tls({"SUBAGENTS_LINK_TLS_KEY": key, "SUBAGENTS_LINK_TLS_CA": cert})
    with pytest.raises(ValueError, match=r"certificate /nowhere.crt and key .* cannot be loaded"):
        link_tls({"SUBAGENTS_LINK_TLS_CERT": "/nowhere.crt", "SUBAGENTS_LINK_TLS_KEY": key})
    with pytest.raises(ValueError, match=r"and key .* cannot be loaded"):  # not this cert's key
        link_tls(
            {"SUBAGENTS_LINK_TLS_CERT": cert, "SUBAGENTS_LINK_TLS_KEY": tls_files["other_key"]}
        )
    with pytest.raises(ValueError, match=r"the link's TLS CA /nowhere.pem .* cannot be loaded"):
        link_tls(
            {
                "SUBAGENTS_LINK_TLS_CERT": cert,
                "SUBAGENTS_LINK_TLS_KEY": key,
                "SUBAGENTS_LINK_TLS_CA": "/nowhere.pem",
            }
        )
    ray = {
        "RAY_USE_TLS": "1",
        "RAY_TLS_SERVER_CERT": cert,
        "RAY_TLS_SERVER_KEY": key,
        "RAY_TLS_CA_CERT": tls_files["other_cert"],
    }
    reused = link_tls(ray)
    assert reused is not None and (reused.cert, reused.key, reused.ca) == (
        cert,
        key,
        tls_files["other_cert"],
    )
    with pytest.raises(ValueError, match=r"RAY_USE_TLS is on but RAY_TLS_CA_CERT not set"):
        link_tls({**ray, "RAY_TLS_CA_CERT": ""})


def test_a_link_connection_polls_for_a_frame_and_for_the_end_of_the_stream() -> None:
    """``SocketConnection.poll`` (one poller per connection, not a selector per call): false
    while nothing came, true for a frame, and true again once the peer is gone, whose read
    then says so."""
    from subagents.cluster.link_gate import PlainChannel, SocketConnection

    mine, theirs = socket.socketpair()
    here, there = SocketConnection(PlainChannel(mine)), SocketConnection(PlainChannel(theirs))
    try:
        assert not here.poll(0)
        there.send_bytes(b"frame")
        assert here.poll(WAIT_S)
        assert here.recv_bytes() == b"frame"
        assert not here.poll(0)
        there.close()
        assert here.poll(WAIT_S)
        with pytest.raises(EOFError):
            here.recv_bytes()
    finally:
        here.close()


def test_a_tls_connection_polls_true_for_a_frame_already_taken_from_the_socket(
    tls_files: dict[str, str],
) -> None:
    """Two frames in the socket, the first read: the second sits decrypted-to-be in the TLS
    object (``TlsChannel.pending``), the socket is empty, and a poll of the socket alone would
    wait (the driver's reader then heard nothing for ``SILENT_S`` and lost the node)."""
    from subagents.cluster.link_gate import SocketConnection
    from subagents.cluster.link_tls import LinkTls, TlsChannel

    tls = LinkTls(tls_files["cert"], tls_files["key"], tls_files["cert"], "test")
    mine, theirs = socket.socketpair()
    server = TlsChannel(mine, tls.server_context(), server=True)
    client = TlsChannel(theirs, tls.client_context(), server=False)
    done = threading.Thread(target=server.handshake, args=(time.monotonic() + WAIT_S,))
    done.start()
    client.handshake(time.monotonic() + WAIT_S)
    done.join(WAIT_S)
    here, there = SocketConnection(server), SocketConnection(client)
    try:
        there.send_bytes(b"one")
        there.send_bytes(b"two")  # (a socket pair: both in the socket once sent)
        assert here.poll(WAIT_S)
        assert here.recv_bytes() == b"one"
        assert here.poll(0)  # the second: taken from the socket with the first
        assert here.recv_bytes() == b"two"
    finally:
        here.close()
        there.close()
