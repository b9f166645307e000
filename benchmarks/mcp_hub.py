"""mcp_hub: what the MCP hub costs against the mcp SDK used directly, measured in the same run.

- a tool call through ``McpHub.call`` from an agent's thread (a portal hop onto the one event
  loop thread, the call, the answer back) against ``ClientSession.call_tool`` awaited on an
  event loop of its own (the baseline), on the same stdio test server (target: p50 within
  1.5x of the SDK's);
- the cold start of a server through the hub (process, ``initialize``, ``tools/list``);
- a call inside a running Runtime: a scripted agent's turn of MCP calls against the same
  number of hub calls (the tool path: permission, journal skipped for a read-only tool).

Prints one JSON object.

    python benchmarks/mcp_hub.py [--quick]
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from _common import emit, median, parse_args, percentile, quiet_logs, ratio, rounded, settle
from subagents.definitions.spec import AgentSpec
from subagents.mcp import McpHub, parse_servers
from subagents.messages import RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

TARGET = 1.5
WARMUP = 20
"""Calls made before timing, on both sides (imports, caches, the first validators)."""
SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp_servers" / "mcp_server_app.py"
CONFIG = {"command": sys.executable, "args": [str(SERVER), "--name", "bench"]}


def sdk_calls(n: int) -> list[float]:
    """Seconds per ``call_tool``, the SDK alone on its own event loop (the baseline)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    times: list[float] = []

    async def main() -> None:
        params = StdioServerParameters(command=CONFIG["command"], args=CONFIG["args"])
        with open(os.devnull, "w") as devnull:
            async with (
                stdio_client(params, errlog=devnull) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await session.list_tools()
                for i in range(WARMUP):
                    await session.call_tool("add", {"a": i, "b": 1})
                for i in range(n):
                    start = time.perf_counter()
                    await session.call_tool("add", {"a": i, "b": 1})
                    times.append(time.perf_counter() - start)

    anyio.run(main)
    return times


def hub_calls(n: int) -> tuple[float, list[float]]:
    """(cold start seconds, seconds per call) through the hub, from this (agent-like) thread."""
    spec = AgentSpec(name="bench", description="d")
    with McpHub(parse_servers({"bench": CONFIG})) as hub:
        start = time.perf_counter()
        run = hub.tools_for(spec)
        cold = time.perf_counter() - start
        cancel = threading.Event()  # as a run calls: watching its cancel signal and deadline
        times: list[float] = []
        for i in range(WARMUP):
            hub.call(run, "mcp__bench__add", {"a": i, "b": 1}, cancel=cancel)
        for i in range(n):
            begin = time.perf_counter()
            hub.call(run, "mcp__bench__add", {"a": i, "b": 1}, cancel=cancel)
            times.append(time.perf_counter() - begin)
    return cold, times


def runtime_calls(turns: int, per_turn: int) -> float:
    """Seconds per MCP call made by a scripted agent in a Runtime (model turns included)."""
    calls = [{"name": "mcp__bench__add", "input": {"a": i, "b": 1}} for i in range(per_turn)]
    model = ScriptedModel({"bench": [{"tool_calls": calls}] * turns + [{"text": "done"}]})
    agent = AgentSpec(name="bench", description="d", tools=("mcp__bench__add",))
    with Runtime([agent], model=model, mcp_servers={"bench": CONFIG}) as rt:
        rt.run("bench", "warm up", wait=120)  # the server's cold start is not counted
        start = time.perf_counter()
        outcome = rt.run("bench", "go", wait=300)
        elapsed = time.perf_counter() - start
    assert outcome.status is RunStatus.COMPLETED, outcome
    return elapsed / (turns * per_turn)


def main() -> None:
    args = parse_args(__doc__ or "mcp_hub")
    quiet_logs()
    n = 20 if args.quick else 1000
    sdk = sdk_calls(n)
    settle()
    cold, hub = hub_calls(n)
    settle()
    per_call_in_run = runtime_calls(2 if args.quick else 20, 5 if args.quick else 25)
    figures: dict[str, Any] = {
        "calls": n,
        "sdk_call_p50_ms": rounded(median(sdk) * 1000, 3),
        "sdk_call_p99_ms": rounded(percentile(sdk, 99) * 1000, 3),
        "hub_call_p50_ms": rounded(median(hub) * 1000, 3),
        "hub_call_p99_ms": rounded(percentile(hub, 99) * 1000, 3),
        "hub_cold_start_s": rounded(cold, 3),
        "runtime_call_ms": rounded(per_call_in_run * 1000, 3),
    }
    value = ratio(median(hub), median(sdk))
    emit(
        "mcp_hub",
        {
            "figures": figures,
            "baseline": "ClientSession.call_tool awaited directly (mcp SDK), same server",
            "target": f"hub call p50 within {TARGET}x of the SDK's",
            "ratio": value,
            "pass": value <= TARGET,
        },
    )


if __name__ == "__main__":
    main()
