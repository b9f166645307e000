"""The autogen-core side of ``peer.py``: the same shapes as agents on SingleThreadedAgentRuntime.

Kept apart (and without ``from __future__ import annotations``) because autogen-core reads the
handlers' type hints at class creation to route messages, and because it is an optional
dependency: ``peer.py`` imports this module only when autogen-core is installed.
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


class Ponger(RoutedAgent):
    @message_handler
    async def on_ping(self, message: Ping, ctx: MessageContext) -> Ping:
        return Ping(message.i + 1)


class Pinger(RoutedAgent):
    @message_handler
    async def on_start(self, message: Start, ctx: MessageContext) -> float:
        start = time.perf_counter()
        i = 0
        for _ in range(message.n):
            reply = await self.send_message(Ping(i), AgentId("ponger", "default"))
            i = reply.i
        if i != message.n:
            raise RuntimeError(f"ping-pong: {i} rounds of {message.n}")
        return 2 * message.n / (time.perf_counter() - start)


class Receiver(RoutedAgent):
    def __init__(self, expected: int, done: asyncio.Event) -> None:
        super().__init__("receiver")
        self.expected, self.done, self.count = expected, done, 0

    @message_handler
    async def on_item(self, message: Item, ctx: MessageContext) -> None:
        self.count += 1
        if self.count == self.expected:
            self.done.set()


class Sender(RoutedAgent):
    @message_handler
    async def on_start(self, message: Start, ctx: MessageContext) -> None:
        for i in range(message.n):
            await self.publish_message(Item(i), TopicId("items", "default"))


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


async def _measure(
    rounds: int, stream_n: int, children: int, limit: int, delay: float
) -> dict[str, float]:
    runtime = SingleThreadedAgentRuntime()
    done = asyncio.Event()
    await Ponger.register(runtime, "ponger", lambda: Ponger("ponger"))
    await Pinger.register(runtime, "pinger", lambda: Pinger("pinger"))
    await Receiver.register(runtime, "receiver", lambda: Receiver(stream_n, done))
    await runtime.add_subscription(TypeSubscription("items", "receiver"))
    await Sender.register(runtime, "sender", lambda: Sender("sender"))
    await Worker.register(runtime, "worker", lambda: Worker(delay))
    await Parent.register(runtime, "parent", lambda: Parent(limit))
    runtime.start()
    try:
        pingpong = await runtime.send_message(Start(rounds), AgentId("pinger", "default"))
        start = time.perf_counter()
        await runtime.send_message(Start(stream_n), AgentId("sender", "default"))
        await asyncio.wait_for(done.wait(), 60)
        stream = stream_n / (time.perf_counter() - start)
        makespan = await runtime.send_message(Start(children), AgentId("parent", "default"))
    finally:
        await runtime.stop_when_idle()
    return {"pingpong": pingpong, "stream": stream, "fanout_s": makespan}


def measure(
    rounds: int, stream_n: int, children: int, limit: int, delay: float
) -> dict[str, float]:
    """Messages/s for ping-pong and stream, and the fan-out makespan in seconds."""
    return asyncio.run(_measure(rounds, stream_n, children, limit, delay))
