"""The autogen-core side of the benchmarks: the same shapes as agents on its
SingleThreadedAgentRuntime (asyncio handlers on one event loop, no persistence).

Kept apart (and without ``from __future__ import annotations``) because autogen-core reads the
handlers' type hints at class creation to route messages, and because it is an optional
dependency (the ``bench`` extra): ``available()`` says whether it is installed, and the
benchmark scripts import the measuring functions only then.

Every function builds its own runtime, so one shape's agents do not sit in the next one's.
"""

import asyncio
import time
from dataclasses import dataclass

from autogen_core import (
    AgentId,
    MessageContext,
    RoutedAgent,
    SingleThreadedAgentRuntime,
    TopicId,
    TypeSubscription,
    message_handler,
)


@dataclass
class Ping:
    i: int


@dataclass
class Start:
    n: int


@dataclass
class Item:
    i: int


@dataclass
class Work:
    i: int


@dataclass
class Measured:
    per_s: float  # items per second
    cpu_us: float  # process CPU microseconds per item


# ---- per mail, 1:1: one agent sends, awaits the answer, sends again -------------------------


class Ponger(RoutedAgent):
    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Ping:
        return Ping(message.i + 1)


class Pinger(RoutedAgent):
    @message_handler
    async def on_start(self, message: Start, ctx: MessageContext) -> Measured:
        start, cpu = time.perf_counter(), time.process_time()
        i = 0
        for _ in range(message.n):
            reply = await self.send_message(Ping(i), AgentId("ponger", "default"))
            i = reply.i
        if i != message.n:
            raise RuntimeError(f"ping-pong: {i} rounds of {message.n}")
        return _rate(2 * message.n, start, cpu)


def _rate(count: int, start: float, cpu: float) -> Measured:
    """Items per second and CPU microseconds per item since ``start`` / ``cpu``."""
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    return Measured(count / elapsed, used / count * 1e6)


async def _pingpong(rounds: int) -> tuple[float, float]:
    runtime = SingleThreadedAgentRuntime()
    await Ponger.register(runtime, "ponger", lambda: Ponger("ponger"))
    await Pinger.register(runtime, "pinger", lambda: Pinger("pinger"))
    runtime.start()
    try:
        rate: Measured = await runtime.send_message(Start(rounds), AgentId("pinger", "default"))
    finally:
        await runtime.stop_when_idle()
    return rate.per_s, rate.cpu_us


def pingpong(rounds: int) -> tuple[float, float]:
    """Messages/s (2 per round: the ping and its answer) and CPU us per message."""
    return asyncio.run(_pingpong(rounds))


# ---- per mail, N:1: N senders, each sending one message at a time to one receiver ----------


class Receiver(RoutedAgent):
    def __init__(self, expected: int, done: asyncio.Event, marks: dict[str, float]) -> None:
        super().__init__("receiver")
        self.expected, self.done, self.marks, self.count = expected, done, marks, 0

    @message_handler
    async def on_item(self, message: Item, ctx: MessageContext) -> None:
        self.count += 1
        if self.count == self.expected:
            self.marks["end"], self.marks["end_cpu"] = time.perf_counter(), time.process_time()
            self.done.set()


class OneAtATimeSender(RoutedAgent):
    @message_handler
    async def on_start(self, message: Start, ctx: MessageContext) -> None:
        for i in range(message.n):  # each awaited: delivered and handled before the next
            await self.send_message(Item(i), AgentId("receiver", "default"))


async def _n_to_one(senders: int, per_sender: int) -> tuple[float, float]:
    runtime = SingleThreadedAgentRuntime()
    done, marks = asyncio.Event(), dict[str, float]()
    total = senders * per_sender
    await Receiver.register(runtime, "receiver", lambda: Receiver(total, done, marks))
    await OneAtATimeSender.register(runtime, "sender", lambda: OneAtATimeSender("sender"))
    runtime.start()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(
            *[
                runtime.send_message(Start(per_sender), AgentId("sender", str(k)))
                for k in range(senders)
            ]
        )
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await runtime.stop_when_idle()
    return total / (marks["end"] - start), (marks["end_cpu"] - cpu) / total * 1e6


def n_to_one(senders: int, per_sender: int) -> tuple[float, float]:
    """Messages/s from ``senders`` agents, each awaiting each of its sends, to one receiver;
    CPU us per message."""
    return asyncio.run(_n_to_one(senders, per_sender))


# ---- batched stream: one handler publishes n messages without waiting for their handling ----


class Publisher(RoutedAgent):
    @message_handler
    async def on_start(self, message: Start, ctx: MessageContext) -> None:
        for i in range(message.n):
            await self.publish_message(Item(i), TopicId("items", "default"))


async def _stream(n: int) -> tuple[float, float]:
    runtime = SingleThreadedAgentRuntime()
    done, marks = asyncio.Event(), dict[str, float]()
    await Receiver.register(runtime, "receiver", lambda: Receiver(n, done, marks))
    await runtime.add_subscription(TypeSubscription("items", "receiver"))
    await Publisher.register(runtime, "publisher", lambda: Publisher("publisher"))
    runtime.start()
    try:
        start, cpu = time.perf_counter(), time.process_time()
        await runtime.send_message(Start(n), AgentId("publisher", "default"))
        await asyncio.wait_for(done.wait(), 60)
    finally:
        await runtime.stop_when_idle()
    return n / (marks["end"] - start), (marks["end_cpu"] - cpu) / n * 1e6


def stream(n: int) -> tuple[float, float]:
    """Messages/s of n publishes from one handler (not awaited to be handled); CPU us each."""
    return asyncio.run(_stream(n))


# ---- fan-out: a parent sends work to n agents, at most `limit` at once ----------------------


class Worker(RoutedAgent):
    def __init__(self, delay: float) -> None:
        super().__init__("worker")
        self.delay = delay

    @message_handler
    async def on_work(self, message: Work, ctx: MessageContext) -> int:
        await asyncio.sleep(self.delay)  # the simulated model call
        return message.i


class Parent(RoutedAgent):
    def __init__(self, limit: int) -> None:
        super().__init__("parent")
        self.limit = limit

    @message_handler
    async def on_start(self, message: Start, ctx: MessageContext) -> float:
        slots = asyncio.Semaphore(self.limit)

        async def one(i: int) -> int:
            async with slots:
                result: int = await self.send_message(Work(i), AgentId("worker", str(i)))
                return result

        start = time.perf_counter()
        done = await asyncio.gather(*[one(i) for i in range(message.n)])
        if sorted(done) != list(range(message.n)):
            raise RuntimeError("fan-out lost children")
        return time.perf_counter() - start


async def _fanout(children: int, limit: int, delay: float) -> tuple[float, float]:
    runtime = SingleThreadedAgentRuntime()
    await Worker.register(runtime, "worker", lambda: Worker(delay))
    await Parent.register(runtime, "parent", lambda: Parent(limit))
    runtime.start()
    try:
        cpu = time.process_time()
        makespan: float = await runtime.send_message(Start(children), AgentId("parent", "default"))
        cpu = time.process_time() - cpu
    finally:
        await runtime.stop_when_idle()
    return makespan, cpu


def fanout(children: int, limit: int, delay: float) -> tuple[float, float]:
    """Makespan (s) of ``children`` agents (a new one per child) each sleeping ``delay``, at
    most ``limit`` at once; and the process CPU seconds it took."""
    return asyncio.run(_fanout(children, limit, delay))
