"""load_definitions: cold load of the shared corpus of agent files, and hot reloads.

Prints one JSON object:

- ``cold``: a new ``DefinitionLoader`` scanning and parsing every file of
  ``../shared/corpus/claude-agents`` (copied to a temporary directory first, so that touching
  files never changes the shared corpus): seconds, files, definitions and files per second;
- ``reload_unchanged``: ``reload()`` when nothing changed (the baseline: listing the folders and
  a ``stat`` per file);
- ``reload_one_touched``: ``reload()`` after one file's mtime changed (``touch``): that file
  alone is parsed again, shadowing and ``extends`` are recomputed for all; its definition is
  equal to before, so no change is reported;
- ``reload_one_edited``: the same after one file's content changed (its definition is reported
  changed).

Each figure is the median of several runs (``runs`` says how many); ``first_cold_seconds`` is the
very first load of the process, with cold caches.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit, median, parse_args, quiet_logs, rounded
from subagents.definitions import DefinitionLoader, Level, Source

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "claude-agents"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    args = parse_args(__doc__ or "")
    quiet_logs()
    if not CORPUS.is_dir():
        raise SystemExit(f"corpus not found: {CORPUS}")
    runs = 3 if args.quick else 21
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "corpus"
        shutil.copytree(CORPUS, root)
        sources = [Source(str(root), Level.DIRS)]

        first_loader = DefinitionLoader(sources)
        first_cold = timed(first_loader.load)
        result = first_loader.load()

        cold = [timed(DefinitionLoader(sources).load) for _ in range(runs)]

        loader = DefinitionLoader(sources)
        loader.load()
        unchanged = [timed(loader.reload) for _ in range(runs)]

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

    cold_s = median(cold)
    emit(
        "load_definitions",
        {
            "corpus": str(CORPUS),
            "runs": runs,
            "files": result.files_scanned,
            "files_loaded": result.files_loaded,
            "definitions": len(result.specs),
            "issues": len(result.issues),
            "first_cold_seconds": rounded(first_cold, 5),
            "cold": {
                "seconds": rounded(cold_s, 5),
                "files_per_second": round(result.files_scanned / cold_s) if cold_s else None,
            },
            "reload_unchanged": {"seconds": rounded(median(unchanged), 5)},
            "reload_one_touched": {
                "seconds": rounded(median(touched), 5),
                "extra_over_unchanged_seconds": rounded(median(touched) - median(unchanged), 5),
                "file": str(victim.relative_to(root)),
                "changed_definitions": sorted(touch_changed),
            },
            "reload_one_edited": {
                "seconds": rounded(median(edited), 5),
                "extra_over_unchanged_seconds": rounded(median(edited) - median(unchanged), 5),
                "changed_definitions": sorted(edit_changed),
            },
        },
    )


if __name__ == "__main__":
    main()
