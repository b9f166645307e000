"""The public API: every type a public call takes, returns or raises is importable from
``subagents`` under one name, and importing the package leaves the application's logging alone.

The walks below find the next type forgotten: the annotations of every public method and
property of every class ``subagents`` exports, the errors their docstrings name or their
bodies raise, and every exception class the package defines (each exported, or named in
``INTERNAL_ERRORS`` with the reason no caller ever sees it)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import textwrap
import typing
import warnings
from typing import Any

import pytest

import subagents


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


BUILT_BY_THE_RUNTIME = {
    "AgentContext": "handed to a function agent, built by its behaviour",
    "RunHandle": "returned by Runtime.spawn and attach",
    "ToolContext": "handed to a tool, built by the tool call",
}
"""Exported classes a program is handed, never builds: their constructors' types (the
runtime's plumbing) are not the public API."""

INTERNAL_ERRORS = {
    "ScratchHomeError": "a ToolError: the user's home of scratch directories is a symlink or"
    " another user's, answered to the model as a Bash call's tool error, or an MCP server's"
    " start that failed (tools/scratch.py)",
    "ShellLimitReached": "a ToolError: Bash's run_in_background past its limit, answered to"
    " the model as a tool error (tools/shell_limits.py)",
    "RunEnding": "a ToolError: a command started while its run's end kills its processes,"
    " answered to the model as a tool error (tools/run_starts.py)",
    "LauncherStuck": "a ToolError: a command's launcher stopped before it detached (a node"
    " host's), answered to the model, or a hook's failure, as a tool error (tools/processes.py)",
    "ActorGone": "the supervisor stopped: SupervisorRequests raises RuntimeClosed instead",
    "AskRevoked": "a start's ask withdrawn before the supervisor took it: RootRuns raises a"
    " TimeoutError naming what was not started (actors/ask_claims.py)",
    "AskOverdue": "a start's ask taken but not decided within its grace: RootRuns raises a"
    " TimeoutError naming the runs that may still start",
    "ClosedUnrecorded": "the close's StopAll refused while the store fails: SupervisorClient"
    ".close asks again until its timeout, then logs what it leaves (actors/outage.py)",
    "ActionError": "the console's stop/send/continue refused: answered as an HTTP error",
    "BadFilter": "the console's filter from a URL: answered as an HTTP 400",
    "RecordRefused": "a lost node's record of mail refused on the driver: the node's sender"
    " sends that mail through the supervisor instead (cluster/record_fence.py)",
    "AttemptOver": "a sender's record of mail from a start of its run that is over: the"
    " sender sends that mail through the supervisor instead, which refuses it (store/fencing.py)",
    "BudgetRefused": "a spawn over budget: the admission refuses it with AdmissionError",
    "CliError": "the command line's: printed as `subagents CMD: error: ...`",
    "SinceError": "a time given on the command line (`--since`): raised as CliError, exit 2",
    "FailedWrite": "a held store write that failed: raised as StoreError",
    "FanOutError": "the fan_out tool's arguments: the model is told, as a tool error",
    "FieldError": "a frontmatter field (a DefinitionError): a LoadIssue of its file",
    "GitError": "a run's worktree: the run is told, as a tool error",
    "HandshakeError": "a stranger at a node host's link: dropped and logged, never raised to"
    " a caller",
    "HandDownError": "a spawn's hand-down options: refused with AdmissionError",
    "HookConfigError": "a definition's hooks: a LoadIssue of its file",
    "IllegalTransition": "a bug in the transition table, never a caller's mistake",
    "KitError": "a ClusterError (exported): what a node needs would not pickle",
    "LandlockError": "the sandbox launcher's, in the tool's process: it exits 125 and the"
    " command never runs (the model is told)",
    "LinkError": "a node's link: its host is lost and its runs started elsewhere",
    "McpCallError": "an MCP tool call: the model is told, as a tool error",
    "McpServerError": "an MCP server that died: the model is told, as a tool error",
    "PgFailedWrite": "a held PostgreSQL store write that failed: raised as StoreError",
    "PlacementError": "no node for a run: the run fails, naming it",
    "PolicyError": "a spawn's policy options: refused with AdmissionError",
    "PolicyRefused": "a spawn's policies: refused with AdmissionError",
    "PoolClosed": "the own-thread pool after close: the runtime raises RuntimeClosed first",
    "NoThread": "a dispatcher that never had a thread, at the thread limit: raised to the"
    " runtime's own putters (the supervisor's effects, logged as failed), never to a caller",
    "InterpreterExiting": "a thread pool asked for a thread while the interpreter finalizes"
    " (code still running at exit, the runtime never closed): no caller waits for an answer",
    "QueueFull": "the queue bound: the admission refuses with AdmissionError",
    "ShapeRefused": "a definition's YAML nested too deep or too big: a LoadIssue of its file",
    "RegistryUnavailableError": "the registry after close: the runtime raises RuntimeClosed",
    "SpawnSettingError": "a definition's spawn settings: a LoadIssue, or AdmissionError",
    "ToolCrash": "a tool that raised: the model is told, as a tool error",
    "UnknownAgentError": "the catalog's: a spawn of an unknown agent is an AdmissionError",
    "UnknownGroupError": "the catalog's (an UnknownAgentError): an AdmissionError",
    "WorktreeError": "a run's worktree: the run is told, as a tool error",
    "YamlProblem": "a definition's frontmatter: a LoadIssue of its file",
}
"""Exception classes of the package that never leave a public call, and why."""


def _exported_classes() -> list[type]:
    return [v for n in subagents.__all__ if isinstance(v := getattr(subagents, n), type)]


def _public_calls() -> list[tuple[str, Any]]:
    """``(Class.member, function)`` for every public method and property of every exported
    class, and its constructor unless the runtime builds it (``BUILT_BY_THE_RUNTIME``)."""
    calls: list[tuple[str, Any]] = []
    for owner in _exported_classes():
        init = owner.__dict__.get("__init__")
        if inspect.isfunction(init) and owner.__name__ not in BUILT_BY_THE_RUNTIME:
            calls.append((f"{owner.__name__}.__init__", init))
        for name, member in inspect.getmembers(owner):
            if name.startswith("_"):
                continue
            if isinstance(member, property) and member.fget is not None:
                calls.append((f"{owner.__name__}.{name}", member.fget))
            elif inspect.isfunction(member) or inspect.ismethod(member):
                calls.append((f"{owner.__name__}.{name}", member))
    return calls


def _package_modules() -> list[str]:
    """Every module of the package, imported (the cluster's need ray: installed for tests)."""
    names = [m.name for m in pkgutil.walk_packages(subagents.__path__, "subagents.")]
    for name in names:
        importlib.import_module(name)
    return names


def _package_errors() -> dict[str, type[BaseException]]:
    """Every public exception class the package defines, by name (one name each)."""
    found: dict[str, type[BaseException]] = {}
    for module in _package_modules():
        for name, value in vars(sys.modules[module]).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == module
                and not name.startswith("_")
            ):
                assert found.get(name, value) is value, f"two exception classes named {name}"
                found[name] = value
    return found


@pytest.mark.parametrize(
    ("name", "call"), _public_calls(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_type_a_public_call_takes_or_returns_is_exported(name: str, call: Any) -> None:
    module = sys.modules[call.__module__]
    names: dict[str, Any] = {}  # aliases name types of other modules (tools.approval...)
    for module_name, loaded in list(sys.modules.items()):
        if module_name.startswith("subagents.") and loaded is not None:
            names.update(vars(loaded))
    namespace = {**names, **vars(module)}
    while True:
        try:
            hints = typing.get_type_hints(call, namespace)
            break
        except NameError as exc:  # a library imported for type checking only (pathspec)
            assert exc.name is not None and exc.name not in namespace, exc
            namespace[exc.name] = importlib.import_module(exc.name)
    missing = {
        cls.__name__
        for hint in hints.values()
        for cls in _classes(hint)
        if getattr(subagents, cls.__name__, None) is not cls
    }
    assert not missing, f"{name} uses types subagents does not export: {sorted(missing)}"


def test_every_exception_the_package_defines_is_exported_or_never_leaves_it() -> None:
    errors = _package_errors()
    exported = {name for name, cls in errors.items() if getattr(subagents, name, None) is cls}
    unclassified = sorted(set(errors) - exported - set(INTERNAL_ERRORS))
    assert not unclassified, (
        f"exception classes neither exported from subagents nor in INTERNAL_ERRORS (with the"
        f" reason no caller sees them): {unclassified}"
    )
    assert not set(INTERNAL_ERRORS) & exported, "exported and called internal"
    assert set(INTERNAL_ERRORS) <= set(errors), "INTERNAL_ERRORS names a class that is gone"


def _raised_names(call: Any) -> set[str]:
    """The names a public call's body raises (``raise Name(...)``, ``raise Name``)."""
    try:
        source = textwrap.dedent(inspect.getsource(call))
    except (OSError, TypeError):
        return set()
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(target, ast.Name):
                names.add(target.id)
    return names


def test_every_error_a_public_call_names_or_raises_is_exported() -> None:
    errors = _package_errors()
    missing: dict[str, set[str]] = {}
    for name, call in _public_calls():
        named = set(re.findall(r"``(\w+)``", inspect.getdoc(call) or "")) | _raised_names(call)
        for error in named & set(errors):
            if getattr(subagents, error, None) is not errors[error]:
                missing.setdefault(error, set()).add(name)
    assert not missing, f"errors public calls raise that subagents does not export: {missing}"


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
