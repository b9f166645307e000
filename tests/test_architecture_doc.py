"""docs/architecture.md names real code: every module path and every ``Class.member`` it
quotes exists in src/subagents.

Why a test: the architecture document is the newcomer's map (each step of a walk names the
module and the function doing it), and a map that names a moved or renamed thing sends the
reader looking for what is not there. Renaming, moving or splitting code now fails here until
the document says where the code went.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pykka

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "subagents"
DOC = ROOT / "docs" / "architecture.md"

# Names the document quotes that are not the project's: other projects' APIs it compares with.
FOREIGN = {"ForkJoinPool.managedBlock"}

QUOTED = re.compile(r"`([^`]+)`")
# a module or package: ``supervision/``, ``runs.py``, ``store/sqlite.py``, ``tests/...``
PATH = re.compile(r"^[a-z_][a-z0-9_/]*(\.py|/)$")
# a class and one of its members: ``RunTable.update``, ``SupervisorCore.finished``
# a module and, right after it (only blanks between), one of its functions:
# ``store/writes.py` `apply_writes``
MODULE_FUNCTION = re.compile(r"`([a-z_][a-z0-9_/]*\.py)`\s+`([a-z_][a-z0-9_]*)(?:\(\))?`")
MEMBER = re.compile(r"^([A-Z][A-Za-z0-9]*)\.([a-z_][a-z0-9_]*)(\(\))?$")


def _quoted(text: str) -> list[str]:
    return QUOTED.findall(text)


def _classes() -> dict[str, tuple[set[str], list[str]]]:
    """Every class of the package by name: the names it defines (methods, fields, class
    attributes, attributes its methods set on ``self``) and the names of its bases, to find
    inherited members."""
    classes: dict[str, tuple[set[str], list[str]]] = {}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            members, bases = classes.setdefault(node.name, (set(), []))
            bases.extend(ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    members.update(t.id for t in item.targets if isinstance(t, ast.Name))
            members.update(
                target.attr
                for sub in ast.walk(node)
                for target in _targets(sub)
                if isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            )
    return classes


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return node.targets
    if isinstance(node, ast.AnnAssign | ast.AugAssign):
        return [node.target]
    return []


def _has_member(classes: dict[str, tuple[set[str], list[str]]], name: str, member: str) -> bool:
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        if current not in classes:
            # a base from pykka (the actors' ``start``, ``on_receive``...): ask pykka itself
            if hasattr(getattr(pykka, current, None), member):
                return True
            continue
        seen.add(current)
        members, bases = classes[current]
        if member in members:
            return True
        todo.extend(bases)
    return False


def _path_exists(quoted: str) -> bool:
    # a path is relative to src/subagents/, or (as the document often writes it inside the
    # row or the walk of its package) to one of its subpackages
    wanted = quoted.rstrip("/")
    if wanted.startswith(("tests/", "docs/", "benchmarks/")):
        return (ROOT / wanted).exists()
    is_package = quoted.endswith("/")
    for candidate in [SRC / wanted, *SRC.rglob(Path(wanted).name)]:
        if candidate.as_posix().endswith("/" + wanted) and (
            candidate.is_dir() if is_package else candidate.is_file()
        ):
            return True
    return False


def test_every_module_the_document_names_exists() -> None:
    paths = sorted({q for q in _quoted(DOC.read_text(encoding="utf-8")) if PATH.match(q)})
    assert len(paths) > 40, f"too few module paths found in {DOC.name}: is the pattern right?"
    missing = [p for p in paths if not _path_exists(p)]
    assert not missing, f"{DOC.name} names modules that are not in src/subagents: {missing}"


def test_every_class_member_the_document_names_exists() -> None:
    quoted = _quoted(DOC.read_text(encoding="utf-8"))
    members = sorted({m.group(1, 2) for q in quoted if (m := MEMBER.match(q))})
    assert len(members) > 40, f"too few Class.member names found in {DOC.name}"
    classes = _classes()
    missing = [
        f"{cls}.{member}"
        for cls, member in members
        if f"{cls}.{member}" not in FOREIGN and not _has_member(classes, cls, member)
    ]
    assert not missing, f"{DOC.name} names members that are not in the code: {missing}"


def _module_defines(quoted: str) -> set[str]:
    """The names a module quoted by its path defines anywhere (functions, methods, classes,
    assignments): enough to find the ``function`` the document names beside it."""
    wanted = quoted.rstrip("/")
    for candidate in [SRC / wanted, *SRC.rglob(Path(wanted).name)]:
        if candidate.as_posix().endswith("/" + wanted) and candidate.is_file():
            tree = ast.parse(candidate.read_text(encoding="utf-8"), filename=str(candidate))
            names: set[str] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                names.update(t.id for t in _targets(node) if isinstance(t, ast.Name))
            return names
    return set()


def test_every_function_named_beside_its_module_exists_there() -> None:
    # the walks write "`store/writes.py` `apply_writes`": the function must be in that module
    text = DOC.read_text(encoding="utf-8")
    pairs = sorted(set(MODULE_FUNCTION.findall(text)))
    assert len(pairs) > 5, f"too few `module.py` `function` pairs found in {DOC.name}"
    missing = [f"{m} {n}" for m, n in pairs if n not in _module_defines(m)]
    assert not missing, f"{DOC.name} names functions not in the module beside them: {missing}"


def test_the_checks_see_a_missing_name() -> None:
    # the two lookups must be able to say no: a made-up module and member are not found
    classes = _classes()
    assert _has_member(classes, "SupervisorCore", "spawn")
    assert not _has_member(classes, "SupervisorCore", "no_such_method")
    assert _path_exists("supervision/core.py") and _path_exists("runs.py")
    assert not _path_exists("supervision/no_such_module.py")
    assert not _path_exists("core.py/")
    assert _path_exists("tests/test_code_sizes.py")
    assert not _path_exists("tests/test_no_such_thing.py")
    assert _has_member(classes, "AgentActor", "start")  # pykka's, inherited
    assert _has_member(classes, "Lifecycle", "ending")  # set in __init__
    assert not _has_member(classes, "AgentActor", "no_such_method")
    assert "apply_writes" in _module_defines("store/writes.py")
    assert "apply_writes" not in _module_defines("store/sqlite.py")
