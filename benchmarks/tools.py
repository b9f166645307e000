"""tools: the built-in tools' cost against what they wrap, measured in the same run.

- Grep (files_with_matches and content) over a generated tree of 10,000 files against the
  ``rg`` command line on the same tree (target: within 1.5x). The needle is in one file in
  ten; ``files_with_matches_every_file`` searches a pattern every file holds: Grep lists
  files newest first, so it ``stat``s every file it found (10,000, not 1,000), against plain
  ``rg --files-with-matches`` (the same files, unsorted: the anchor) and, for reference,
  ``rg --sortr modified`` (rg sorting them itself, which makes it search on one thread);
- Read of a 1 MB file (the first 2,000 lines, and lines from the middle) against reading
  the file in Python;
- a tool call's overhead: a user tool called directly, through ``Tool.call`` (input
  validated), through the whole tool path of an LLM run (permission, hooks off, journal
  skipped: idempotent) and, in a running Runtime on SQLite, per call with and without the
  journal's round trip (a side-effecting tool is recorded before it runs).

Prints one JSON object.

    python benchmarks/tools.py [--quick]
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import emit, median, parse_args, quiet_logs, ratio, rounded, settle
from subagents.behaviour.port import AgentEnv
from subagents.behaviour.tool_calls import ToolCalls
from subagents.definitions.spec import AgentSpec
from subagents.messages import RunRecord, ToolUseBlock
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime
from subagents.store.sqlite import SQLiteStore
from subagents.tools.base import Tool
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import RunSession, ToolContext
from subagents.tools.grep import rg_binary
from subagents.tools.processes import ProcessGroups
from subagents.tools.workspace import Workspace

TARGET = 1.5
TOOLS = builtin_tools()
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa")


def make_tree(root: Path, files: int) -> None:
    """``files`` small text files in 100 folders; one in ten mentions the needle."""
    per_dir = max(1, files // 100)
    for i in range(files):
        folder = root / f"pkg{i // per_dir:03d}"
        folder.mkdir(exist_ok=True)
        lines = [f"{WORDS[(i + j) % len(WORDS)]} line {j} of file {i}" for j in range(30)]
        if i % 10 == 0:
            lines[15] = f"def needle_{i}(x): return x  # the needle"
        (folder / f"mod{i:05d}.py").write_text("\n".join(lines) + "\n")


def context(root: Path, processes: ProcessGroups) -> ToolContext:
    import structlog

    workspace = Workspace(root)
    return ToolContext(
        workspace=workspace,
        run_id="bench",
        agent="bench",
        cancel=threading.Event(),
        deadline=time.monotonic() + 3600,
        log=structlog.get_logger("bench"),
        processes=processes,
        session=RunSession(cwd=workspace.root),
    )


def timed(fn: Any, rounds: int) -> float:
    """Median seconds of ``fn()`` over ``rounds`` (after one warm-up call)."""
    return paired(fn, fn, rounds)[0]


def paired(a: Any, b: Any, rounds: int) -> tuple[float, float]:
    """Median seconds of ``a()`` and of ``b()``, run in alternation (after a warm-up of
    each), so that a busy moment of a shared machine taxes both alike."""
    a()
    b()
    times_a, times_b = [], []
    for _ in range(rounds):
        for fn, times in ((a, times_a), (b, times_b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return median(times_a), median(times_b)


def grep_figures(root: Path, ctx: ToolContext, rounds: int) -> dict[str, Any]:
    rg = rg_binary()
    figures: dict[str, Any] = {}
    listing = {"output_mode": "files_with_matches"}
    cases = {
        "files_with_matches": (["--files-with-matches"], listing, "needle_"),
        "content": (["--no-heading", "--line-number"], {"output_mode": "content"}, "needle_"),
        "files_with_matches_every_file": (["--files-with-matches"], listing, "line 0 of file"),
    }
    for name, (flags, options, pattern) in cases.items():
        command = [rg, "--no-config", "--color=never", *flags, "-e", pattern, str(root)]

        def cli(command: list[str] = command) -> None:
            subprocess.run(command, capture_output=True, check=True)

        found = [""]

        def tool(
            options: dict[str, str] = options, pattern: str = pattern, found: list[str] = found
        ) -> None:
            answer = TOOLS["Grep"].call({"pattern": pattern, **options}, ctx)
            found[0] = str(answer).split("\n", 1)[0]

        cli_s, tool_s = paired(cli, tool, rounds)
        figures[name] = {
            "pattern": pattern,
            "rg_cli_ms": rounded(cli_s * 1000, 2),
            "grep_tool_ms": rounded(tool_s * 1000, 2),
            "ratio": ratio(tool_s, cli_s),
            "answer_head": found[0],
        }
    every = figures["files_with_matches_every_file"]
    sort_flags = ["--files-with-matches", "--sortr", "modified"]
    sorted_cli = [rg, "--no-config", "--color=never", *sort_flags, "-e", every["pattern"]]
    every["rg_cli_sorted_newest_first_ms"] = rounded(
        timed(
            lambda: subprocess.run([*sorted_cli, str(root)], capture_output=True, check=True),
            rounds,
        )
        * 1000,
        2,
    )
    return figures


def read_figures(root: Path, ctx: ToolContext, rounds: int) -> dict[str, Any]:
    big = root / "big.txt"
    line = "x" * 49 + "\n"
    big.write_text(line * (1_000_000 // len(line)))

    def python_read() -> None:
        big.read_text().splitlines()

    def head() -> None:
        TOOLS["Read"].call({"file_path": str(big)}, ctx)

    def middle() -> None:
        TOOLS["Read"].call({"file_path": str(big), "offset": 10_000, "limit": 100}, ctx)

    base = timed(python_read, rounds)
    first, mid = timed(head, rounds), timed(middle, rounds)
    return {
        "file_bytes": big.stat().st_size,
        "python_read_and_split_ms": rounded(base * 1000, 3),
        "read_first_2000_lines_ms": rounded(first * 1000, 3),
        "read_100_lines_at_line_10000_ms": rounded(mid * 1000, 3),
        "ratio_first_2000": ratio(first, base),
    }


def add(a: int, b: int) -> int:
    return a + b


class _Port:
    """The little of an agent's port the tool path uses (no actor: the path alone)."""

    def __init__(self) -> None:
        import structlog

        self.record = RunRecord(run_id="bench", agent="bench", task="t", root_run_id="bench")
        self.spec = AgentSpec(name="bench", description="d")
        self.cancel = threading.Event()
        self.deadline = time.monotonic() + 3600
        self.log = structlog.get_logger("bench")

    def flush_reports(self) -> None:
        """Nothing is held here (no actor): the path's own cost is what is measured."""


def overhead_figures(root: Path, calls: int) -> dict[str, Any]:
    tool = Tool.from_function(add, idempotent=True)
    args = {"a": 1, "b": 2}
    env = AgentEnv(model=ScriptedModel({}), agents=list, workspace=Workspace(root))
    path = ToolCalls(env, _Port())  # type: ignore[arg-type]
    use = ToolUseBlock(id="toolu_1", name="add", input=args)

    def per_call(fn: Any) -> float:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls

    direct = median([per_call(lambda: add(1, 2)) for _ in range(3)])
    via_call = median([per_call(lambda: tool.call(args)) for _ in range(3)])
    via_path = median([per_call(lambda: path.execute(use, tool, 1)) for _ in range(3)])
    return {
        "direct_us": rounded(direct * 1e6, 3),
        "tool_call_us": rounded(via_call * 1e6, 3),
        "tool_path_us": rounded(via_path * 1e6, 3),
        "tool_path_overhead_us": rounded((via_path - direct) * 1e6, 3),
    }


def padded(a: int, b: int) -> str:
    """A tool whose answer is 1 KB: what a turn's answers add to its checkpoint."""
    return f"{a + b}".ljust(1024, ".")


def per_call_in_a_turn(root: Path, tool: Tool, calls: int, rounds: int) -> float:
    """Seconds per call in a real run on SQLite whose one turn makes ``calls`` calls of
    ``tool`` (the median of ``rounds`` runs, after a warm-up run)."""
    batch = [{"name": tool.name, "input": {"a": i, "b": 1}} for i in range(calls)]
    model = ScriptedModel({"bench": [{"tool_calls": batch}, "done"]})
    spec = AgentSpec(name="bench", description="d", prompt="p")
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "runs.db")
        with Runtime(
            [spec], model=model, store=store, tools=[tool], workspace=root,
            command_poll_s=0, sweep_every_s=0,
        ) as rt:  # fmt: skip
            rt.run("bench", "warm up")
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                rt.run("bench", "go")
                times.append(time.perf_counter() - start)
        store.close()
    settle()
    return median(times) / calls


def journal_figures(root: Path, calls: int, long_calls: int) -> dict[str, Any]:
    """Per call in a real run on SQLite: an idempotent tool vs a side-effecting one (``calls``
    calls in one turn), and a side-effecting tool with 1 KB answers in a turn of ``calls``
    vs ``long_calls`` calls: each call's journal writes (started, answered) must cost the
    size of that call, not of the turn so far (``long_turn_growth`` near 1, not growing with
    the turn as it did when each call re-saved the whole checkpoint)."""
    out: dict[str, Any] = {}
    for label, idempotent in (("idempotent", True), ("side_effecting", False)):
        tool = Tool.from_function(add, idempotent=idempotent)
        out[f"{label}_us_per_call"] = rounded(per_call_in_a_turn(root, tool, calls, 5) * 1e6, 1)
    out["journal_round_trip_us"] = rounded(
        out["side_effecting_us_per_call"] - out["idempotent_us_per_call"], 1
    )
    tool = Tool.from_function(padded)
    short = per_call_in_a_turn(root, tool, calls, 3)
    long = per_call_in_a_turn(root, tool, long_calls, 3)
    out["long_turn_calls"] = long_calls
    out["short_turn_1kb_us_per_call"] = rounded(short * 1e6, 1)
    out["long_turn_1kb_us_per_call"] = rounded(long * 1e6, 1)
    out["long_turn_growth"] = ratio(long, short)
    return out


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    quiet_logs()
    files = 200 if args.quick else 10_000
    rounds = 2 if args.quick else 11
    calls = 200 if args.quick else 20_000
    processes = ProcessGroups()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            tree = root / "tree"
            tree.mkdir()
            make_tree(tree, files)
            ctx = context(root, processes)
            grep = grep_figures(tree, ctx, rounds)
            settle()
            read = read_figures(root, ctx, rounds)
            settle()
            overhead = overhead_figures(root, calls)
            journal = journal_figures(root, 20, 100 if args.quick else 1000)
    finally:
        processes.kill_all()
    worst = max(g["ratio"] for g in grep.values())
    emit(
        "tools",
        {
            "figures": {
                "files": files,
                "grep": grep,
                "read": read,
                "overhead": overhead,
                "journal": journal,
            },
            "baseline": "the rg command line on the same tree, in the same run",
            "target": TARGET,
            "ratio": worst,
            "pass": worst <= TARGET,
        },
    )


if __name__ == "__main__":
    main()
