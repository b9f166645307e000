"""worktree_git: what running the runtime's own git in the runs' sandbox (``isolation.git``
``GitJail``, session 26) costs, against the same git unconfined, in the same process.

- one look (``git rev-parse HEAD``) through ``git()``: unconfined, and jailed (the launcher:
  ``python -I -S`` putting itself under Landlock and seccomp, then exec'ing git);
- a worktree run's start and end, the runtime's part only: ``Worktrees.create`` then
  ``finish`` of a worktree left unchanged (so removed), with ``sandbox=None`` and with the
  runs' sandbox; the git calls each makes are counted.

Wall times are medians (under load, not results: read the CPU columns, which count this
process and its children). Prints one JSON object; ``ratio`` is jailed / unconfined.

    python benchmarks/worktree_git.py [--n 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from subagents.isolation import Worktrees
from subagents.isolation import git as gitmod
from subagents.tools.sandbox import Sandbox


def _cpu() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _measure(n: int, step: Callable[[], None]) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(n):
        cpu, wall = _cpu(), time.perf_counter()
        step()
        walls.append(time.perf_counter() - wall)
        cpus.append(_cpu() - cpu)
    return {"wall_ms": 1e3 * statistics.median(walls), "cpu_ms": 1e3 * statistics.median(cpus)}


def _repo(root: Path) -> Path:
    def sh(*args: str) -> None:
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)

    root.mkdir()
    sh("init", "-q", "-b", "main")
    sh("config", "user.email", "b@b")
    sh("config", "user.name", "b")
    (root / "f.txt").write_text("x\n")
    sh("add", ".")
    sh("commit", "-qm", "first")
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20)
    n = parser.parse_args().n
    sandbox = Sandbox().resolve()
    calls = [0]
    run = gitmod._run

    def counted(*args: object, **kwargs: object) -> str:
        calls[0] += 1
        return run(*args, **kwargs)  # type: ignore[arg-type]

    gitmod._run = counted  # type: ignore[assignment]
    out: dict[str, object] = {"load": os.getloadavg()[0], "n": n, "landlock_abi": sandbox.abi}
    with tempfile.TemporaryDirectory() as temp:
        repo = _repo(Path(temp) / "repo")
        jail = gitmod.GitJail(sandbox)
        look = {
            "unconfined": _measure(n, lambda: gitmod.git(repo, "rev-parse", "HEAD")),
            "jailed": _measure(n, lambda: gitmod.git(repo, "rev-parse", "HEAD", jail=jail)),
        }
        trees = Worktrees(repo)
        count = iter(range(10**6))
        cycles: dict[str, object] = {}
        for name, given in (("unconfined", None), ("jailed", sandbox)):

            def cycle(given: Sandbox | None = given) -> None:
                run_id = f"r{next(count)}"
                trees.create(run_id, "bench", sandbox=given)
                report = trees.finish(run_id)
                assert report is not None and not report.kept, report

            before = calls[0]
            cycles[name] = {**_measure(n, cycle), "git_calls": (calls[0] - before) / n}
    for table in (look, cycles):
        a, b = table["unconfined"], table["jailed"]  # type: ignore[index]
        table["ratio_wall"] = round(b["wall_ms"] / a["wall_ms"], 2)  # type: ignore[index]
        table["ratio_cpu"] = round(b["cpu_ms"] / a["cpu_ms"], 2)  # type: ignore[index]
    out["look"], out["worktree_start_end"] = look, cycles
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
