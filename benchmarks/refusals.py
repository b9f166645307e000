"""refusals: how quickly definitions built to explode are refused.

The test suite checks that each of these is refused with a clear reason
(``tests/definitions/test_defs_bad_input.py``, ``test_defs_yamlsafe.py``); how long a refusal
takes is a speed claim, measured here instead (no wall-clock assertions in the suite, whose
machine is shared and loaded).

Prints one JSON object: for each bomb, the median and the worst seconds to refuse it (through
``parse_markdown``, and through the bounded YAML reader with and without libyaml), and the
seconds to load a folder of every kind of bad file next to good ones. Target: every refusal
within 2 s (the bound the tests used to assert). Baseline: parsing an ordinary definition.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit, median, parse_args, quiet_logs, ratio, rounded
from subagents.definitions import DefinitionError, DefinitionLoader, Level, Source, parse_markdown
from subagents.definitions.yamlsafe import MAX_DEPTH, YamlProblem, load_yaml

TARGET_S = 2.0
GOOD = "---\nname: {name}\ndescription: fine\n---\nPrompt.\n"
BILLION_LAUGHS = """---
name: lol
description: d
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
---
Body
"""


def deep(levels: int) -> str:
    return f"---\nname: deep\ndescription: d\nx: {'[' * levels}{']' * levels}\n---\nB\n"


def block_deep(levels: int) -> str:
    lines = [f"{'  ' * i}k{i}:" for i in range(levels)]
    return (
        "---\nname: deep\ndescription: d\nx:\n" + "\n".join("  " + ln for ln in lines) + " 1\n---\n"
    )


MARKDOWN_BOMBS = {
    "billion_laughs": BILLION_LAUGHS,
    "flow_nesting_21": deep(21),
    "flow_nesting_200k": deep(200_000),
    "block_nesting_40": block_deep(40),
    "nodes_30k": "---\nname: a\ndescription: d\nx: [" + "1," * 30_000 + "1]\n---\n",
}
YAML_BOMBS = {
    "anchor": "a: &x [1]\nb: *x\n",
    "flow_nesting_over_limit": "a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "\n",
    "flow_nesting_100k": "a: " + "[" * 100_000 + "\n",
    "nodes_25k": "a: [" + "1," * 25_000 + "1]\n",
}


def seconds(action: Callable[[], object], expected: type[Exception], runs: int) -> list[float]:
    taken = []
    for _ in range(runs):
        started = time.perf_counter()
        try:
            action()
        except expected:
            pass
        else:
            raise SystemExit(f"not refused: {action}")
        taken.append(time.perf_counter() - started)
    return taken


def bad_folder(root: Path) -> None:
    for index in range(3):
        (root / f"good{index}.md").write_text(GOOD.format(name=f"good{index}"))
    (root / "binary.md").write_bytes(b"---\nname: b\n\x00\x01\x02")
    (root / "bomb.md").write_text(BILLION_LAUGHS)
    (root / "deep.md").write_text(deep(200_000))
    (root / "empty.md").write_bytes(b"")
    with (root / "huge.md").open("wb") as handle:  # sparse: refused from its size
        handle.truncate(4 * 1024**3)
    os.mkfifo(root / "fifo.md")  # a naive reader would block for ever
    (root / "dangling.md").symlink_to(root / "nowhere.md")


def main() -> None:
    args = parse_args(__doc__ or "")
    quiet_logs()
    runs = 2 if args.quick else 9
    figures: dict[str, dict[str, float]] = {}
    good = GOOD.format(name="ordinary")
    baseline = median([seconds_ok(lambda: parse_markdown(good)) for _ in range(runs)])
    for name, text in MARKDOWN_BOMBS.items():
        taken = seconds(lambda t=text: parse_markdown(t, source="bomb.md"), DefinitionError, runs)
        figures[f"markdown_{name}"] = {"median_s": rounded(median(taken), 5), "max_s": max(taken)}
    for name, text in YAML_BOMBS.items():
        for libyaml in (True, False):
            taken = seconds(
                lambda t=text, c=libyaml: load_yaml(t, use_libyaml=c), YamlProblem, runs
            )
            key = f"yaml_{name}_{'libyaml' if libyaml else 'pure'}"
            figures[key] = {"median_s": rounded(median(taken), 5), "max_s": max(taken)}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        bad_folder(root)
        loads = [seconds_ok(DefinitionLoader([Source(str(root), Level.DIRS)]).load)]
        figures["load_folder_of_bad_files"] = {"median_s": rounded(loads[0], 5), "max_s": loads[0]}
    worst = max(f["max_s"] for f in figures.values())
    for entry in figures.values():
        entry["max_s"] = rounded(entry["max_s"], 5)
    emit(
        "refusals",
        {
            "sizes": {"runs": runs, "quick": args.quick},
            "figures": figures,
            "baseline": {"ordinary_definition_s": rounded(baseline, 6)},
            "target": f"every refusal within {TARGET_S:g} s",
            "ratio": ratio(worst, TARGET_S),
            "pass": worst <= TARGET_S,
        },
    )


def seconds_ok(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
