"""load_definitions: cold load of a corpus of agent files, and hot-reload polls.

The corpus is ``--corpus DIR``, else ``$SUBAGENTS_CORPUS``, else ``../shared/corpus/claude-agents``
beside the repository when it is there (372 public Claude Code agent files). It is copied to a
temporary directory first, so touching files never changes it. Without a corpus the script
prints ``"available": false`` and why (not an error: the corpus is not part of the repository).

Figures:

- ``cold`` (the headline): the FIRST load in a fresh interpreter, what a program or the command
  line pays when it starts: a new ``DefinitionLoader`` scanning, reading, parsing and
  validating every file, with whatever it imports or builds on first use, after the imports of
  the script itself (``subagents.definitions``, ``yaml``: start-up, ``cli_startup.py``'s). The
  median of ``fresh`` interpreters (alternated with the baseline's). Baseline, same run, also
  the first call of a fresh interpreter: the floor of any loader doing the same reading,
  namely listing the folders, reading each file and ``yaml.load(..., CSafeLoader)`` of its
  frontmatter (no checks, no validation). The files are in the page cache (the corpus was just
  copied): cold means the process, not the disk. Target (issue 17): < 0.1 s for the corpus;
- ``warm``: the same load repeated in one process (median of ``runs``, interleaved with the
  floor's): caches and code paths warm, what a long-lived program's later loads cost. It was
  the headline once; it flattered the cold load;
- ``reload_unchanged``: ``reload()`` when nothing changed. Baseline: listing the folders and a
  ``stat`` per file (what any poll must do to notice a change);
- ``reload_one_touched``: ``reload()`` after one file's mtime changed (``touch``): that file
  alone is parsed again; its definition is equal to before, so no change is reported;
- ``reload_one_edited``: the same after one file's content changed (reported changed).

Each figure of the main process is the median of ``runs``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from _common import emit, median, parse_args, quiet_logs, ratio, rounded, run_side
from subagents.definitions import DefinitionLoader, Level, Source

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "claude-agents"
TARGET_COLD_S = 0.1


def find_corpus(option: str | None) -> tuple[Path | None, str]:
    """The corpus folder and where it came from, or None and why not."""
    if option:
        return Path(option), "--corpus"
    env = os.environ.get("SUBAGENTS_CORPUS")
    if env:
        return Path(env), "SUBAGENTS_CORPUS"
    if DEFAULT_CORPUS.is_dir():
        return DEFAULT_CORPUS, "default (../shared/corpus/claude-agents beside the repository)"
    return None, (
        f"no corpus: pass --corpus DIR or set SUBAGENTS_CORPUS ({DEFAULT_CORPUS} is absent)"
    )


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _files(root: str) -> list[str]:
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        out.extend(
            os.path.join(folder, n)
            for n in names
            if n.endswith(".md") and not n.lower().startswith("readme")
        )
    return sorted(out)


def raw_cold(root: str) -> int:
    """The floor: list, read, and CSafeLoader each file's frontmatter. Returns files read."""
    count = 0
    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    for path in _files(root):
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        parts = text.split("\n---", 1) if text.startswith("---") else []
        if parts:
            with contextlib.suppress(yaml.YAMLError):  # a lenient file: read another way
                yaml.load(parts[0][3:], Loader=loader)
        count += 1
    return count


def raw_poll(root: str) -> int:
    """The floor of a poll: list the folders, ``stat`` each file."""
    return sum(1 for path in _files(root) if os.stat(path).st_size >= 0)


def _extra(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", default=None, help="folder of agent files (see above)")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (median)")
    parser.add_argument(
        "--fresh", type=int, default=None, help="fresh interpreters for the cold load (median)"
    )
    parser.add_argument("--side", choices=("first", "raw-first"), help=argparse.SUPPRESS)


def first_in_fresh(root: str, fresh: int) -> tuple[list[float], list[float]]:
    """Seconds of the first load in ``fresh`` new interpreters, ours and the floor's
    alternated (a change in the machine's load hits both)."""
    ours, raw = [], []
    for _ in range(fresh):
        for side, into in (("first", ours), ("raw-first", raw)):
            out = run_side("load_definitions.py", "--side", side, "--corpus", root)
            into.append(float(out["seconds"]))
    return ours, raw


def side(kind: str, root: str) -> None:
    """In a fresh interpreter: the first load (ours or the floor's), timed."""
    if kind == "first":
        seconds = timed(DefinitionLoader([Source(root, Level.DIRS)]).load)
    else:
        seconds = timed(lambda: raw_cold(root))
    emit("load_definitions-side", {"seconds": seconds})


def main() -> None:
    args = parse_args(__doc__ or "", _extra)
    quiet_logs()
    if args.side is not None:
        side(args.side, args.corpus)
        return
    corpus, origin = find_corpus(args.corpus)
    if corpus is None or not corpus.is_dir():
        reason = origin if corpus is None else f"corpus not found: {corpus} (from {origin})"
        emit(
            "load_definitions",
            {
                "available": False,
                "reason": reason,
                "figures": {},
                "baseline": None,
                "target": f"cold load < {TARGET_COLD_S} s",
                "ratio": None,
                "pass": None,
            },
        )
        return
    runs = args.runs or (3 if args.quick else 21)
    fresh = args.fresh or (2 if args.quick else 9)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "corpus"
        shutil.copytree(corpus, root)
        sources = [Source(str(root), Level.DIRS)]

        fresh_ours, fresh_raw = first_in_fresh(str(root), fresh)
        first_loader = DefinitionLoader(sources)
        first_cold = timed(first_loader.load)  # this process's first: imports already warm
        result = first_loader.load()

        cold, raw = [], []
        for _ in range(runs):  # interleaved: a change in the machine's load hits both
            cold.append(timed(DefinitionLoader(sources).load))
            raw.append(timed(lambda: raw_cold(str(root))))

        loader = DefinitionLoader(sources)
        loader.load()
        unchanged, polls = [], []
        for _ in range(runs):
            unchanged.append(timed(loader.reload))
            polls.append(timed(lambda: raw_poll(str(root))))

        victim = Path(loader.files[len(loader.files) // 2])
        touched = []
        touch_changed: set[str] = set()
        for index in range(runs):
            stamp = time.time_ns() + (index + 1) * 1_000_000_000
            os.utime(victim, ns=(stamp, stamp))  # `touch`: same content, new mtime
            started = time.perf_counter()
            _, changes = loader.reload()
            touched.append(time.perf_counter() - started)
            touch_changed.update(changes.changed)

        original = victim.read_text(encoding="utf-8")
        edited = []
        edit_changed: set[str] = set()
        for index in range(runs):
            victim.write_text(f"{original}\n<!-- edit {index} -->\n", encoding="utf-8")
            started = time.perf_counter()
            _, changes = loader.reload()
            edited.append(time.perf_counter() - started)
            edit_changed.update(changes.changed)

    cold_s, raw_s = median(fresh_ours), median(fresh_raw)
    warm_s, warm_raw_s = median(cold), median(raw)
    poll_s, raw_poll_s = median(unchanged), median(polls)
    emit(
        "load_definitions",
        {
            "available": True,
            "corpus": str(corpus),
            "corpus_from": origin,
            "figures": {
                "files": result.files_scanned,
                "files_loaded": result.files_loaded,
                "definitions": len(result.specs),
                "issues": len(result.issues),
                "cold": {
                    "what": "the first load in a fresh interpreter",
                    "seconds": rounded(cold_s, 5),
                    "trials_s": [rounded(x, 5) for x in fresh_ours],
                    "files_per_s": round(result.files_scanned / cold_s) if cold_s else None,
                    "raw_read_and_yaml_s": rounded(raw_s, 5),
                    "raw_trials_s": [rounded(x, 5) for x in fresh_raw],
                    "ratio_to_raw": ratio(cold_s, raw_s),
                },
                "warm": {
                    "what": "the load repeated in one process (not the headline)",
                    "seconds": rounded(warm_s, 5),
                    "raw_read_and_yaml_s": rounded(warm_raw_s, 5),
                    "ratio_to_raw": ratio(warm_s, warm_raw_s),
                    "first_of_the_main_process_s": rounded(first_cold, 5),
                },
                "reload_unchanged": {
                    "seconds": rounded(poll_s, 5),
                    "raw_list_and_stat_s": rounded(raw_poll_s, 5),
                    "ratio_to_raw": ratio(poll_s, raw_poll_s),
                },
                "reload_one_touched": {
                    "seconds": rounded(median(touched), 5),
                    "extra_over_unchanged_s": rounded(median(touched) - poll_s, 5),
                    "file": str(victim.relative_to(root)),
                    "changed_definitions": sorted(touch_changed),
                },
                "reload_one_edited": {
                    "seconds": rounded(median(edited), 5),
                    "extra_over_unchanged_s": rounded(median(edited) - poll_s, 5),
                    "changed_definitions": sorted(edit_changed),
                },
            },
            "baseline": "read + CSafeLoader of each file's frontmatter (cold); list + stat (poll)",
            "target": f"cold load (first in a fresh interpreter) of the corpus < {TARGET_COLD_S} s",
            "ratio": rounded(cold_s / TARGET_COLD_S),
            "pass": cold_s < TARGET_COLD_S,
            "sizes": {"runs": runs, "fresh": fresh},
            "seconds": rounded(time.perf_counter() - START, 2),
        },
    )


START = time.perf_counter()

if __name__ == "__main__":
    main()
