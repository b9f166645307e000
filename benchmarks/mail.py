"""mail: messages per second between two agents, through the runtime and through raw pykka.

Two shapes, each measured on the runtime with the SQLite store, with the MemoryStore, and on two
bare pykka actors in the same process:

- ``stream``: a sender mails the receiver n times without waiting for each acknowledgement
  (it awaits the last one); the receiver ``await ctx.receive()``s n times. Raw: one actor
  ``tell``s the other n times. Throughput = n / (first send -> last receipt).
- ``pingpong``: one mail at a time, each answered before the next is sent (n / 2 rounds of 2
  messages). Raw: two actors ``tell`` each other.

Through the runtime every mail goes sender -> supervisor (recorded, and with SQLite committed
before it is acknowledged) -> receiver; the raw figure has none of that, so it is the ceiling.
Targets (issue 8): durable >= 0.25x raw, in-memory >= 0.5x raw, on the ``stream`` shape.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pykka

from _common import emit, median, parse_args, quiet_logs, ratio, rounded, settle
from subagents.behaviour.function import AgentContext
from subagents.runtime import Runtime
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore
from subagents.supervision.limits import Limits

TARGETS = {"sqlite": 0.25, "memory": 0.5}

# ---- raw pykka -------------------------------------------------------------------------------


class _Counter(pykka.ThreadingActor):
    def __init__(self, n: int, done: threading.Event, marks: dict[str, float]) -> None:
        super().__init__()
        self.n, self.done, self.marks, self.count = n, done, marks, 0

    def on_receive(self, message: Any) -> None:
        self.count += 1
        if self.count == self.n:
            self.marks["end"] = time.perf_counter()
            self.done.set()


class _Flooder(pykka.ThreadingActor):
    def __init__(self, to: pykka.ActorRef[Any], marks: dict[str, float]) -> None:
        super().__init__()
        self.to, self.marks = to, marks

    def on_receive(self, message: Any) -> None:
        self.marks["start"] = time.perf_counter()
        for i in range(message):
            self.to.tell(i)


class _Pong(pykka.ThreadingActor):
    def on_receive(self, message: Any) -> None:
        sender, i = message
        sender.tell(i)


class _Ping(pykka.ThreadingActor):
    def __init__(
        self,
        other: pykka.ActorRef[Any],
        rounds: int,
        done: threading.Event,
        marks: dict[str, float],
    ) -> None:
        super().__init__()
        self.other, self.rounds, self.done, self.marks = other, rounds, done, marks

    def on_receive(self, message: Any) -> None:
        if message == "go":
            self.marks["start"] = time.perf_counter()
            self.other.tell((self.actor_ref, 0))
        elif message + 1 == self.rounds:
            self.marks["end"] = time.perf_counter()
            self.done.set()
        else:
            self.other.tell((self.actor_ref, message + 1))


def raw_stream(n: int) -> float:
    done, marks = threading.Event(), dict[str, float]()
    receiver = _Counter.start(n, done, marks)
    sender = _Flooder.start(receiver, marks)
    try:
        sender.tell(n)
        if not done.wait(60):
            raise RuntimeError("raw stream did not finish in 60 s")
        return n / (marks["end"] - marks["start"])
    finally:
        sender.stop()
        receiver.stop()


def raw_pingpong(n: int) -> float:
    rounds = n // 2
    done, marks = threading.Event(), dict[str, float]()
    pong = _Pong.start()
    ping = _Ping.start(pong, rounds, done, marks)
    try:
        ping.tell("go")
        if not done.wait(60):
            raise RuntimeError("raw ping-pong did not finish in 60 s")
        return 2 * rounds / (marks["end"] - marks["start"])
    finally:
        ping.stop()
        pong.stop()


# ---- the runtime -----------------------------------------------------------------------------


def _stream_agents(marks: dict[str, float]) -> dict[str, Callable[..., Any]]:
    async def sender(ctx: AgentContext) -> str:
        n = int(ctx.task)
        marks["start"] = time.perf_counter()
        sends = [ctx.send("receiver", "m") for _ in range(n)]  # not awaited: pipelined
        await sends[-1]  # acknowledged in order: the last ack means all were
        return "sent"

    async def receiver(ctx: AgentContext) -> str:
        n = int(ctx.task)
        got = 0
        for _ in range(n):
            if await ctx.receive(timeout=60) is None:
                break
            got += 1
        marks["end"] = time.perf_counter()
        return str(got)

    async def root(ctx: AgentContext) -> str:
        received, _ = await ctx.gather(
            ctx.spawn("receiver", ctx.task), ctx.spawn("sender", ctx.task)
        )
        return str(received.result)

    return {"sender": sender, "receiver": receiver, "root": root}


def _pingpong_agents(marks: dict[str, float]) -> dict[str, Callable[..., Any]]:
    async def ponger(ctx: AgentContext) -> str:
        for _ in range(int(ctx.task)):
            mail = await ctx.receive(timeout=60)
            if mail is None:
                return "timed out"
            ctx.send(mail.sender, "pong")
        return "done"

    async def pinger(ctx: AgentContext) -> str:
        rounds = int(ctx.task)
        to = "ponger"
        marks["start"] = time.perf_counter()
        got = 0
        for _ in range(rounds):
            ctx.send(to, "ping")
            mail = await ctx.receive(timeout=60)
            if mail is None:
                break
            to = mail.sender  # by run id from now on: no name lookup
            got += 1
        marks["end"] = time.perf_counter()
        return str(got)

    async def root(ctx: AgentContext) -> str:
        _, pinged = await ctx.gather(ctx.spawn("ponger", ctx.task), ctx.spawn("pinger", ctx.task))
        return str(pinged.result)

    return {"ponger": ponger, "pinger": pinger, "root": root}


def runtime_rate(shape: str, store: RunStore, n: int) -> float:
    """Messages per second for ``n`` messages of ``shape`` through a runtime on ``store``."""
    marks: dict[str, float] = {}
    agents = _stream_agents(marks) if shape == "stream" else _pingpong_agents(marks)
    limits = Limits(timeout_s=120.0)
    units = n if shape == "stream" else n // 2
    with Runtime(agents, store=store, limits=limits) as rt:
        outcome = rt.run("root", str(units), wait=120)
    store.close()
    if outcome.result != str(units):
        raise RuntimeError(f"{shape}: expected {units} through, got {outcome!r}")
    per_unit = 1 if shape == "stream" else 2
    return per_unit * units / (marks["end"] - marks["start"])


def _store(kind: str, folder: Path, index: int) -> RunStore:
    if kind == "memory":
        return MemoryStore()
    return SQLiteStore(folder / f"mail-{index}.db")


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=None, help="messages per runtime trial")
    parser.add_argument("--repeats", type=int, default=None, help="trials per figure (median)")


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    n = args.n or (200 if args.quick else 3000)
    raw_n = n * 10
    repeats = args.repeats or (1 if args.quick else 3)
    figures: dict[str, Any] = {}
    passed = True
    with tempfile.TemporaryDirectory(prefix="subagents-bench-") as tmp:
        folder = Path(tmp)
        index = 0
        for shape in ("stream", "pingpong"):
            raw_fn = raw_stream if shape == "stream" else raw_pingpong
            trials: dict[str, list[float]] = {"raw": [], "sqlite": [], "memory": []}
            for _ in range(repeats):  # interleaved, so a change in the machine's load hits all
                trials["raw"].append(raw_fn(raw_n))
                settle()
                for kind in ("sqlite", "memory"):
                    index += 1
                    trials[kind].append(runtime_rate(shape, _store(kind, folder, index), n))
                    settle()
            raw = median(trials["raw"])
            shape_figures: dict[str, Any] = {"raw_msgs_per_s": round(raw)}
            for kind in ("sqlite", "memory"):
                rate = median(trials[kind])
                r = ratio(rate, raw)
                entry: dict[str, Any] = {
                    "msgs_per_s": round(rate),
                    "ratio": r,
                    "target": TARGETS[kind],
                    "pass": r >= TARGETS[kind],
                }
                shape_figures[kind] = entry
                if shape == "stream":
                    passed = passed and bool(entry["pass"])
            figures[shape] = shape_figures
    emit(
        "mail",
        {
            "figures": figures,
            "baseline": "raw pykka: ThreadingActor.tell between two actors, same run",
            "target": "stream: sqlite >= 0.25x raw, memory >= 0.5x raw",
            "ratio": {k: figures["stream"][k]["ratio"] for k in ("sqlite", "memory")},
            "pass": passed,
            "sizes": {"runtime_messages": n, "raw_messages": raw_n, "repeats": repeats},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
