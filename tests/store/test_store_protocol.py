"""The store protocol is stated once (``store.base.RunStore``, every method with its
docstring) and every store implements it: each subclasses it, defines every method itself
with a signature the protocol's callers can call (the same parameters, kinds, defaults and
types; anything more optional), and refers to the protocol's docstring instead of restating
it. The cluster's store service serves every method. Checked from the classes (``inspect``),
so a method added to the protocol and forgotten by one store fails here, not on a cluster.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pytest

from pgserver import require_postgres
from subagents.cluster.remote_store import ClusterStore
from subagents.cluster.store_service import ANSWERING_WRITES, READS, WRITES
from subagents.store.base import RunStore
from subagents.store.memory import MemoryStore
from subagents.store.sqlite import SQLiteStore

try:
    from subagents.store.postgres import PostgresStore
except ImportError:  # no psycopg: its tests say so (pgserver.require_postgres)
    PostgresStore = None  # type: ignore[assignment,misc]

STORES = [
    MemoryStore,
    SQLiteStore,
    pytest.param(PostgresStore, id="PostgresStore"),
    ClusterStore,
]

PROTOCOL = {
    name: member
    for name, member in vars(RunStore).items()
    if inspect.isfunction(member) and not name.startswith("_")
}


def test_the_protocol_states_every_method_once_with_its_docstring() -> None:
    assert len(PROTOCOL) >= 27  # batch, the runs, ..., check_fence, close
    undocumented = [name for name, method in PROTOCOL.items() if not inspect.getdoc(method)]
    assert undocumented == []


def _incompatible(name: str, protocol: Any, implementation: Any) -> list[str]:
    """Why a caller of the protocol's ``name`` could not call ``implementation`` as it is
    written there (empty: it can)."""
    wanted, offered = inspect.signature(protocol), inspect.signature(implementation)
    hints_wanted = typing.get_type_hints(protocol)
    hints_offered = typing.get_type_hints(implementation)
    problems = []
    for param in list(wanted.parameters.values())[1:]:  # past self
        mine = offered.parameters.get(param.name)
        if mine is None:
            problems.append(f"{name}: no parameter {param.name!r}")
            continue
        if mine.kind != param.kind:
            problems.append(f"{name}({param.name}): {mine.kind.description}, not {param.kind}")
        if mine.default != param.default:
            problems.append(f"{name}({param.name}): default {mine.default!r}, not {param.default}")
        if hints_offered.get(param.name) != hints_wanted.get(param.name):
            problems.append(f"{name}({param.name}): type {hints_offered.get(param.name)}")
    for extra in list(offered.parameters.values())[1:]:
        optional = extra.default is not inspect.Parameter.empty or extra.kind in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        )
        if extra.name not in wanted.parameters and not optional:
            problems.append(f"{name}: parameter {extra.name!r} the protocol does not pass")
    if hints_offered.get("return") != hints_wanted.get("return"):
        problems.append(f"{name}: returns {hints_offered.get('return')}")
    return problems


@pytest.mark.parametrize("store", STORES, ids=lambda s: getattr(s, "__name__", "PostgresStore"))
def test_every_store_implements_every_method_of_the_protocol(store: type[Any]) -> None:
    if store is None:
        require_postgres()
    assert RunStore in store.__mro__  # it refers to the protocol (and mypy checks it)
    missing = [name for name in PROTOCOL if name not in vars(store)]
    assert missing == [], f"{store.__name__} inherits the protocol's empty {missing}"
    problems = [
        problem
        for name, method in PROTOCOL.items()
        for problem in _incompatible(name, method, vars(store)[name])
    ]
    assert problems == []


@pytest.mark.parametrize("store", STORES, ids=lambda s: getattr(s, "__name__", "PostgresStore"))
def test_no_store_restates_the_protocol_docstrings(store: type[Any]) -> None:
    """A store's method shows the protocol's docstring (``inspect.getdoc`` inherits it); its
    own docstring, if any, says what it adds, never the protocol's promise again."""
    if store is None:
        require_postgres()
    restated = []
    for name, method in PROTOCOL.items():
        own = vars(store)[name].__doc__
        assert inspect.getdoc(getattr(store, name))  # the protocol's, when it has none
        if (
            own is not None
            and inspect.cleandoc(own).split("\n")[0]
            == (inspect.getdoc(method) or "").split("\n")[0]
        ):
            restated.append(name)
    assert restated == []


def test_the_cluster_serves_every_method_of_the_protocol() -> None:
    """Every call a client may make of the head's store is named as a read, a write held
    in a batch, or a write that answers at once; the rest are the client's own
    (``ended_by_others``: what the client itself can tell of other writers, nothing)."""
    served = READS | WRITES | ANSWERING_WRITES
    assert set(PROTOCOL) - served == {"batch", "close", "mail_recording", "ended_by_others"}
    assert served <= set(PROTOCOL)
