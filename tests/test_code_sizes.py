"""The size bounds: no class over 400 lines, no module of supervision/ over 450, no module over
600, no function over 60, and only the listed modules directly under ``src/subagents/``.

Why a test: a class or a decision module that grows past what one can read at once is how
the supervisor core became 1,196 lines. Walking the source with ``ast`` keeps the bound true
without anyone remembering it; the fix for a failure is a split along a real seam (one concept
per module, docs/architecture.md), not a raised bound.

The allowlists below are debts with an owner, not exceptions: each entry names who is paying
it. An entry that is no longer needed (the function or module is gone or back under its bound)
fails ``test_the_allowlists_hold_only_what_is_still_over``, so the lists only ever shrink.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "subagents"
MAX_CLASS_LINES = 400
MAX_SUPERVISION_MODULE_LINES = 450
MAX_MODULE_LINES = 600
# A function is measured from its ``def`` line to its last line, decorators and docstring left
# out: the bound is on the code one must hold in mind to follow it, and a docstring saying why
# is what the team asks for (counting it would reward deleting explanations instead of code).
# Comments inside the body count: they are read with the code.
MAX_FUNCTION_LINES = 60

# Functions over MAX_FUNCTION_LINES today, each in the area of the engineer (issue 27) who is
# rewriting that code; the lead removes an entry when that branch lands.
LONG_FUNCTIONS_OWNED_ELSEWHERE: dict[str, str] = {
    # item 3 (e-admit): admission as a pipeline of small checks
    # items 3 and 4 (e-admit, e-lifecycle): the core's parts change shape
    "supervision/core.py::SupervisorCore.__init__": "issue 27 items 3, 4 (e-admit, e-lifecycle)",
    # item 5 (e-protocols): the CLI's command skeleton written once
    "cli/info_cmd.py::show": "issue 27 item 5 (e-protocols)",
    "cli/demo_cmd.py::_demo": "issue 27 item 5 (e-protocols)",
}

# Modules over MAX_MODULE_LINES today.
LONG_MODULES: dict[str, str] = {}

# The modules directly under src/subagents/: the public face and the few every layer uses
# (issue 27 item 1: the runtime's modules are in runtime/, the messages in messages/). A new
# top-level module fails the test: put it in the subpackage of its layer
# (docs/architecture.md, CONTRIBUTING.md).
TOP_LEVEL_MODULES = {
    "__init__.py",
    "blocking.py",
    "logs.py",
    "telemetry.py",
}


def _sources() -> list[Path]:
    found = sorted(SRC.rglob("*.py"))
    assert found, f"no sources under {SRC}"
    return found


def _name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _class_lengths(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lengths = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            lengths.append((node.name, node.end_lineno - start + 1))
    return lengths


def _function_length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    assert node.end_lineno is not None
    length = node.end_lineno - node.lineno + 1
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        assert first.end_lineno is not None
        length -= first.end_lineno - first.lineno + 1
    return length


def _function_lengths(path: Path) -> dict[str, int]:
    """Every function and method of a module by its qualified name (``Class.method``, a nested
    one as ``outer.<locals>.inner``), with its length; a nested function counts in its own
    length and in the one around it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                lengths[name] = _function_length(child)
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return lengths


def _all_function_lengths() -> dict[str, int]:
    return {
        f"{_name(path)}::{name}": length
        for path in _sources()
        for name, length in _function_lengths(path).items()
    }


def _allowed_long_functions() -> dict[str, str]:
    return LONG_FUNCTIONS_OWNED_ELSEWHERE


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
        if (n := _lines(path)) > MAX_SUPERVISION_MODULE_LINES
    ]
    assert not too_long, f"supervision/ modules over {MAX_SUPERVISION_MODULE_LINES}: {too_long}"


def test_no_module_is_over_the_bound() -> None:
    too_long = [
        f"{_name(path)}: {n} lines"
        for path in _sources()
        if (n := _lines(path)) > MAX_MODULE_LINES and _name(path) not in LONG_MODULES
    ]
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them): {too_long}"


def test_no_function_is_over_the_bound() -> None:
    lengths = _all_function_lengths()
    assert len(lengths) > 1000, "the walk found too few functions: is SRC right?"
    allowed = _allowed_long_functions()
    too_long = [
        f"{name}: {length} lines"
        for name, length in sorted(lengths.items())
        if length > MAX_FUNCTION_LINES and name not in allowed
    ]
    assert not too_long, (
        f"functions over {MAX_FUNCTION_LINES} lines (docstring aside; split each along its "
        f"seams into well-named helpers): {too_long}"
    )


def test_only_the_listed_modules_sit_directly_under_the_package() -> None:
    found = {path.name for path in SRC.glob("*.py")}
    new = sorted(found - TOP_LEVEL_MODULES)
    assert not new, (
        f"new modules directly under src/subagents/: {new}; put each in the subpackage of "
        "its layer (docs/architecture.md)"
    )


def test_the_allowlists_hold_only_what_is_still_over() -> None:
    # an entry for a function or module that was split (or moved, or renamed) must go, so
    # the lists shrink as the debts are paid and never hide a new long function
    lengths = _all_function_lengths()
    stale_functions = [
        f"{name} ({owner})"
        for name, owner in _allowed_long_functions().items()
        if lengths.get(name, 0) <= MAX_FUNCTION_LINES
    ]
    modules = {_name(path): _lines(path) for path in _sources()}
    stale_modules = [name for name in LONG_MODULES if modules.get(name, 0) <= MAX_MODULE_LINES]
    gone = sorted(TOP_LEVEL_MODULES - {path.name for path in SRC.glob("*.py")})
    assert not stale_functions, f"remove from the long-function lists: {stale_functions}"
    assert not stale_modules, f"remove from LONG_MODULES: {stale_modules}"
    assert not gone, f"remove from TOP_LEVEL_MODULES (no longer there): {gone}"


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


@pytest.mark.parametrize(
    "statements, over", [(MAX_FUNCTION_LINES - 3, False), (MAX_FUNCTION_LINES - 2, True)]
)
def test_the_function_walk_measures_a_method_without_its_docstring(
    tmp_path: Path, statements: int, over: bool
) -> None:
    # a method: a decorator, its def line, a three-line docstring, a nested function of two
    # lines, then ``statements`` lines; its length is the def line, the nested one and the
    # statements: the decorator and the docstring are not counted
    body = "".join(f"        x{i} = {i}\n" for i in range(statements))
    source = (
        "class Big:\n"
        "    @staticmethod\n"
        "    def run():\n"
        '        """Why it is.\n\n        More."""\n'
        "        def inner():\n"
        "            return 1\n" + body
    )
    path = tmp_path / "big.py"
    path.write_text(source, encoding="utf-8")
    lengths = _function_lengths(path)
    assert lengths == {"Big.run": statements + 3, "Big.run.<locals>.inner": 2}
    assert (lengths["Big.run"] > MAX_FUNCTION_LINES) is over
