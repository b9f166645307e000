"""Shared by every test folder: this file's folder is put on ``sys.path`` by pytest (rootdir
conftest, prepend import mode), so tests import the helpers here (``corpora``) by name."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import structlog

from collection_order import grouped_by_folder
from pgserver import pg_server, pg_url  # noqa: F401  (the session's PostgreSQL server)
from raycluster import ray_cluster  # noqa: F401  (the session's Ray cluster, a fixture)

RAY_TEST_TIMEOUT_S = 300
"""A ``ray`` test may be the one that starts the session's cluster (~20 s idle, far more on
a loaded machine): its timeout covers that, not only its own work."""

PG_TEST_TIMEOUT_S = 240
"""A test on PostgreSQL may be the one that starts its worker's server (``pgserver``: initdb
and a start, seen taking 21.6 s at load ~25), and the CLI ones start several ``subagents``
commands that each connect to it: three of them passed pytest's 120 s at that load (session
13) on work that takes ~10 s on a quiet machine. A hang guard, not a timing: a hung test
still fails, later."""


def _uses_postgres(item: pytest.Item) -> bool:
    """Whether ``item`` runs on the session's PostgreSQL server: it asks for it (``pg_url``,
    ``pg_server``), or one of its parameters is ``"postgres"`` (a fixture that then asks for
    ``pg_url`` itself, ``request.getfixturevalue``)."""
    if {"pg_url", "pg_server"} & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(v == "postgres" for v in callspec.params.values())


_BYTECODE_CACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Give the interpreters the tests start (hundreds of ``subagents`` commands) a bytecode
    cache when the environment forbids writing one (``PYTHONDONTWRITEBYTECODE``): otherwise
    each compiles the package's source again, about half of its start-up (measured:
    ``import subagents.runtime`` 0.8 s of CPU without, 0.4 s with; benchmarks/README.md).
    The cache is a temporary folder (``PYTHONPYCACHEPREFIX``), never the source tree, made
    once by the first process (pytest-xdist's workers inherit it) and removed at the end.

    And the command line's paths grouped by folder (``collection_order.py``: pytest 9.1
    loses a folder's conftest fixtures when its paths are interleaved with another's)."""
    if not config.option.pyargs:
        config.args[:] = grouped_by_folder(config.args, config.invocation_params.dir)
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    cache = tempfile.mkdtemp(prefix="subagents-tests-pycache-")
    config.stash[_BYTECODE_CACHE] = cache
    os.environ["PYTHONPYCACHEPREFIX"] = cache
    del os.environ["PYTHONDONTWRITEBYTECODE"]


def pytest_unconfigure(config: pytest.Config) -> None:
    cache = config.stash.get(_BYTECODE_CACHE, None)
    if cache is not None:
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        shutil.rmtree(cache, ignore_errors=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--on-cluster",
        action="store_true",
        help="host every Runtime of the selected tests on the session's 2-node Ray cluster"
        " ($SUBAGENTS_RAY_ADDRESS): the same tests, on two nodes (docs/cluster.md)",
    )


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its hook is plain)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_cluster = config.getoption("--on-cluster")
    for item in items:
        if not item.get_closest_marker("timeout"):
            if on_cluster or item.get_closest_marker("ray"):
                item.add_marker(pytest.mark.timeout(RAY_TEST_TIMEOUT_S))
            elif _uses_postgres(item):
                item.add_marker(pytest.mark.timeout(PG_TEST_TIMEOUT_S))
        if item.get_closest_marker("ray"):
            # under pytest-xdist (--dist loadgroup) every ray test goes to one worker, so the
            # session's cluster is started once, not once per worker
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif not item.get_closest_marker("xdist_group"):
            # every other test goes with its module: a module's fixtures (a CLI team's runs, a
            # benchmark's output) are then set up once, not again each time the worker comes
            # back to the module after tests of others
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: absent without it
def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
    """Under ``--dist loadgroup`` every test must carry its group (pytest-xdist appends it
    to the node id): if a pytest release stops honouring that, stop at once, saying why,
    rather than run each module's fixtures and a Ray cluster in every worker (the CI time
    bound). Checked here, in the controller, as each worker reports what it collected: a
    worker that raised instead only crashed, and pytest-xdist printed an INTERNALERROR
    without the reason (seen with pytest 9.2.0 and pytest-xdist 3.8.0)."""
    if node.config.getvalue("dist") != "loadgroup":
        return
    ungrouped = [nodeid for nodeid in ids if "@" not in nodeid]
    if ungrouped:
        pytest.exit(
            f"pytest-xdist did not group {len(ungrouped)} tests (e.g. {ungrouped[0]}):"
            " this pytest and pytest-xdist do not work together; see pyproject.toml",
            returncode=pytest.ExitCode.USAGE_ERROR,
        )


@pytest.fixture(autouse=True)
def structlog_as_it_was() -> Iterator[None]:
    """A test that configures structlog (to read its lines) leaves it as it found it.

    Restoring a saved configuration is not enough when structlog was not configured: that
    marks it configured with structlog's own defaults (every level, on stdout), and every later
    test in the process would then format and print each debug line of every run."""
    configured = structlog.is_configured()
    saved = structlog.get_config()
    yield
    if configured:
        structlog.configure(**saved)
    else:
        structlog.reset_defaults()


@pytest.fixture
def every_log() -> structlog.testing.LogCapture:
    """Every log line at every level, whatever an earlier test configured (the package's
    default filters below WARNING, and ``capture_logs`` keeps the level filter it finds: a
    test waiting on an info line saw it or not by the order tests ran in, in CI);
    ``structlog_as_it_was`` restores the configuration after."""
    capture = structlog.testing.LogCapture()
    structlog.configure(
        processors=[capture],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    return capture


@pytest.fixture(scope="session", autouse=True)
def state_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every default store the tests open (a ``Runtime`` or a cluster's head given no store,
    the CLI given no ``--state``) is in a temporary state directory, never the user's
    ``~/.local/state/subagents``: a test run must leave the user's runs alone, and a branch's
    newer schema written there once made every later run of older code refuse the file
    (session 26: a cluster test's head wrote schema 14 into root's own store). A test that
    sets the variable itself still does (``monkeypatch``, an explicit ``env``)."""
    saved = os.environ.get("SUBAGENTS_STATE_DIR")
    os.environ["SUBAGENTS_STATE_DIR"] = str(tmp_path_factory.mktemp("default-state"))
    yield
    if saved is None:
        os.environ.pop("SUBAGENTS_STATE_DIR", None)
    else:
        os.environ["SUBAGENTS_STATE_DIR"] = saved


@pytest.fixture(scope="session", autouse=True)
def on_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """With ``--on-cluster``: every ``Runtime`` joins the session's cluster (its default
    store is the cluster's, whose file is in a temporary state directory)."""
    if not request.config.getoption("--on-cluster"):
        yield
        return
    saved = {k: os.environ.get(k) for k in ("SUBAGENTS_RAY_ADDRESS", "SUBAGENTS_STATE_DIR")}
    os.environ["SUBAGENTS_STATE_DIR"] = str(tmp_path_factory.mktemp("cluster-state"))
    cluster = request.getfixturevalue("ray_cluster")  # started with that state directory
    os.environ["SUBAGENTS_RAY_ADDRESS"] = cluster.address
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    # Started from a shell's background job (`pytest ... &`, a CI step run that way), this
    # process ignores SIGINT, and so would every command a test starts (an ignored signal
    # survives exec, and Python then installs no Ctrl-C handler): a test of Ctrl-C would
    # see the command ignore it. A handler (unlike "ignore") is reset to the default at
    # exec, so the commands get the Ctrl-C handling a user's terminal would give them.
    signal.signal(signal.SIGINT, signal.default_int_handler)
