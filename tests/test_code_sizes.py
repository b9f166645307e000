"""The size bounds of issue 14: no class over 400 lines, no module of supervision/ over 450.

Why a test: a class or a decision module that grows past what one can read at once is how
the supervisor core became 1,196 lines. Walking the source with ``ast`` keeps the bound true
without anyone remembering it; the fix for a failure is a split along a real seam (one concept
per module, docs/architecture.md), not a raised bound.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "subagents"
MAX_CLASS_LINES = 400
MAX_SUPERVISION_MODULE_LINES = 450


def _sources() -> list[Path]:
    found = sorted(SRC.rglob("*.py"))
    assert found, f"no sources under {SRC}"
    return found


def _class_lengths(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lengths = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            lengths.append((node.name, node.end_lineno - start + 1))
    return lengths


def test_no_class_is_over_the_bound() -> None:
    too_long = [
        f"{path.relative_to(SRC.parent)}: class {name} is {length} lines"
        for path in _sources()
        for name, length in _class_lengths(path)
        if length > MAX_CLASS_LINES
    ]
    assert not too_long, f"classes over {MAX_CLASS_LINES} lines: {too_long}"


def test_no_supervision_module_is_over_the_bound() -> None:
    modules = sorted((SRC / "supervision").glob("*.py"))
    assert len(modules) > 10, "supervision/ not found where expected"
    too_long = [
        f"{path.name}: {n} lines"
        for path in modules
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_SUPERVISION_MODULE_LINES
    ]
    assert not too_long, f"supervision/ modules over {MAX_SUPERVISION_MODULE_LINES}: {too_long}"


@pytest.mark.parametrize("lines, over", [(MAX_CLASS_LINES - 2, False), (MAX_CLASS_LINES, True)])
def test_the_class_walk_measures_a_class(tmp_path: Path, lines: int, over: bool) -> None:
    # a class of ``lines`` body lines plus its header: the walk must see its real length
    body = "".join(f"    x{i} = {i}\n" for i in range(lines))
    path = tmp_path / "big.py"
    path.write_text("@decorated\nclass Big:\n" + body, encoding="utf-8")
    ((name, length),) = _class_lengths(path)
    assert name == "Big"
    assert length == lines + 2
    assert (length > MAX_CLASS_LINES) is over
