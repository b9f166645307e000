"""sandbox: what the Landlock sandbox adds to a Bash call, against an unsandboxed call, in the
same run on the same machine.

- a whole Bash tool call (``true``: the shell, its process group, the output file, the cwd
  tracking) through ``run_bash``, with the run's sandbox (the launcher: ``python -I -S``
  restricting itself with Landlock, then exec'ing the shell) and without it;
- the process start alone: ``sh -c true`` started and waited for directly, and through the
  launcher;
- the launcher's interpreter start alone (``python -I -S -c pass``), the bulk of the cost.

Prints one JSON object; ``ratio`` is sandboxed / unsandboxed.

    python benchmarks/sandbox.py [--quick]
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import emit, median, parse_args, percentile, quiet_logs, ratio, rounded, settle
from subagents.tools.bash import run_bash
from subagents.tools.context import RunSession, ToolContext
from subagents.tools.processes import ProcessGroups
from subagents.tools.sandbox import RunSandbox, Sandbox
from subagents.tools.sandbox_exec import kernel_abi
from subagents.tools.workspace import Workspace


def context(root: Path, processes: ProcessGroups, sandbox: RunSandbox | None) -> ToolContext:
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
        tool_use_id="toolu_bench",
        sandbox=sandbox,
    )


def timed_ms(fn: Callable[[], object], n: int, cpu: list[float] | None = None) -> list[float]:
    """``n`` calls' wall times (ms); with ``cpu``, each call's CPU (ms: this process's and
    its children's, user and system: what load on the machine barely changes) appended."""
    fn()  # warm: page cache, the interpreter's first start
    samples = []
    for _ in range(n):
        used = _cpu_s()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
        if cpu is not None:
            cpu.append((_cpu_s() - used) * 1000)
    return samples


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pair(plain: Callable[[], object], sandboxed: Callable[[], object], n: int) -> dict[str, float]:
    """Both sides, interleaved in rounds so load on the machine falls on both alike."""
    a: list[float] = []
    b: list[float] = []
    cpu_a: list[float] = []
    cpu_b: list[float] = []
    for _ in range(max(1, n // 10)):
        a += timed_ms(plain, 10, cpu_a)
        b += timed_ms(sandboxed, 10, cpu_b)
        settle()
    return {
        "plain_cpu_ms": rounded(sum(cpu_a) / len(cpu_a), 3),
        "sandboxed_cpu_ms": rounded(sum(cpu_b) / len(cpu_b), 3),
        "plain_ms": rounded(median(a), 3),
        "sandboxed_ms": rounded(median(b), 3),
        "plain_p90_ms": rounded(percentile(a, 90), 3),
        "sandboxed_p90_ms": rounded(percentile(b, 90), 3),
        "added_ms": rounded(median(b) - median(a), 3),
        "ratio": ratio(median(b), median(a)),
        "samples": len(a),
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0] if __doc__ else "sandbox")
    quiet_logs()
    n = 10 if args.quick else 200
    abi = kernel_abi()
    figures: dict[str, object] = {"landlock_abi": abi}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        processes = ProcessGroups()
        try:
            sandbox = Sandbox.coerce(True).for_run(workspace=root, read_only=False, network=False)
            plain = context(root, processes, None)
            boxed = context(root, processes, sandbox)
            if abi:
                figures["bash_call"] = pair(
                    lambda: run_bash({"command": "true"}, plain),
                    lambda: run_bash({"command": "true"}, boxed),
                    n,
                )
                temp = processes.run_dir("bench")
                figures["process_start"] = pair(
                    lambda: subprocess.run(["sh", "-c", "true"], check=True),
                    lambda: subprocess.run(sandbox.argv(["sh", "-c", "true"], temp), check=True),
                    n,
                )
            figures["launcher_interpreter_ms"] = rounded(
                median(
                    timed_ms(lambda: subprocess.run([sys.executable, "-I", "-S", "-c", "pass"]), n)
                ),
                3,
            )
        finally:
            processes.kill_all()
    call = figures.get("bash_call")
    emit(
        "sandbox",
        {
            "figures": figures,
            "baseline": "the same Bash call without the sandbox, in the same run",
            "target": None,  # none set: the figure is reported (docs/tools.md), not judged
            "ratio": call["ratio"] if isinstance(call, dict) else None,
            "pass": None,
            "note": "no Landlock on this kernel: only the interpreter start is measured"
            if not abi
            else "sandboxed = through the launcher (Landlock, network off); plain = as before",
        },
    )


if __name__ == "__main__":
    main()
