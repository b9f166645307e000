"""The public API: every type a public call takes or returns is importable from ``subagents``
under one name, and importing the package leaves the application's logging alone."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing
import warnings
from typing import Any

import pytest

import subagents
from subagents.runtime import RunHandle, Runtime


def _classes(annotation: Any) -> set[type]:
    """The classes of the subagents package an annotation mentions (unions and generics
    opened)."""
    found: set[type] = set()
    if isinstance(annotation, list):  # the parameters of a Callable
        for item in annotation:
            found |= _classes(item)
        return found
    args = typing.get_args(annotation)
    if args:
        for arg in args:
            found |= _classes(arg)
        origin = typing.get_origin(annotation)
        if isinstance(origin, type):
            found |= _classes(origin)
        return found
    if isinstance(annotation, type) and annotation.__module__.startswith("subagents"):
        found.add(annotation)
    return found


def _public_calls() -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = [("Runtime", Runtime.__init__)]
    for owner in (Runtime, RunHandle):
        for name, member in inspect.getmembers(owner):
            if name.startswith("_"):
                continue
            if isinstance(member, property) and member.fget is not None:
                calls.append((f"{owner.__name__}.{name}", member.fget))
            elif inspect.isfunction(member):
                calls.append((f"{owner.__name__}.{name}", member))
    return calls


@pytest.mark.parametrize(
    ("name", "call"), _public_calls(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_type_a_public_call_takes_or_returns_is_exported(name: str, call: Any) -> None:
    module = sys.modules[call.__module__]
    names: dict[str, Any] = {}  # aliases name types of other modules (tools.approval...)
    for module_name, loaded in list(sys.modules.items()):
        if module_name.startswith("subagents.") and loaded is not None:
            names.update(vars(loaded))
    hints = typing.get_type_hints(call, {**names, **vars(module)})
    missing = {
        cls.__name__
        for hint in hints.values()
        for cls in _classes(hint)
        if getattr(subagents, cls.__name__, None) is not cls
    }
    assert not missing, f"{name} uses types subagents does not export: {sorted(missing)}"


def test_every_exported_name_resolves_to_one_object() -> None:
    seen: dict[int, str] = {}
    for name in subagents.__all__:
        value = getattr(subagents, name)
        assert getattr(value, "__name__", name) == name  # one name per type: no aliases
        assert id(value) not in seen, f"{name} and {seen[id(value)]} are one object"
        seen[id(value)] = name


def test_run_result_is_a_deprecated_name_of_outcome() -> None:
    assert "RunResult" not in subagents.__all__
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert subagents.RunResult is subagents.Outcome  # type: ignore[attr-defined]
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "use subagents.Outcome" in str(caught[0].message)


def test_importing_the_package_configures_no_logging() -> None:
    code = (
        "import structlog, subagents\n"
        "from subagents import Runtime, Outcome, SQLiteStore, TreeNode\n"
        "print(structlog.is_configured())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"


def test_a_runtime_keeps_the_logging_an_application_configured() -> None:
    code = (
        "import structlog\n"
        "structlog.configure(processors=[structlog.processors.JSONRenderer()])\n"
        "before = structlog.get_config()['processors']\n"
        "from subagents import Runtime\n"
        "with Runtime([]):\n"
        "    pass\n"
        "print(structlog.get_config()['processors'] is before)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "True"  # (its log line went to stdout)


def test_a_runtime_configures_quiet_logging_when_nobody_did() -> None:
    code = (
        "import structlog\n"
        "from subagents import Runtime\n"
        "with Runtime([]):\n"
        "    print(structlog.is_configured())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "True"
