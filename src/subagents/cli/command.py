"""The skeleton every sub-command shares, written once.

Each `subagents` sub-command is a module with ``add_arguments(parser)`` and ``run(args) ->
int`` (``cli.main``). Those that inspect the store (`ps`, `info`, `log`, `tree`, `stop`,
`send`, `wait`, `attach`, `resume`) share one shape, which lives here:

- the arguments: ``RUN`` (an id, a unique prefix of one, or ``#N``: ``add_run_argument``),
  ``--json`` and the store (``--state PATH`` or ``--ray ADDRESS``): ``add_inspect_arguments``;
- the store opened (``--ray`` or the local file, which must exist), the hosts alive read
  first, and the run RUN names resolved: ``inspecting(args)``;
- a ``StoreError`` while reading turned into a ``CliError`` with its message:
  ``store_errors()``;
- a ``CliError`` printed as ``subagents NAME: error: ...`` on stderr and its exit code
  returned: ``reports_errors(NAME)`` around the command's body;
- ``--json`` printing one JSON document, else the human view: ``emit``.

A command keeps only what is its own: its options, what it reads, how it shows it.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from subagents.cli.state import (
    CliError,
    add_json_argument,
    add_store_arguments,
    fail,
    liveness,
    open_inspected_store,
    resolve,
)

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord
    from subagents.store.leases import Liveness

Body = Callable[[argparse.Namespace], int]

RUN_HELP = "run id, unique prefix, or #N"


def add_run_argument(parser: argparse.ArgumentParser, *, optional: bool = False) -> None:
    """``RUN`` (``args.run_ref``): the run the command is about (``optional``: it may be
    left out, for a command that also takes ``--all``)."""
    if optional:
        parser.add_argument("run_ref", nargs="?", metavar="RUN", help=RUN_HELP)
    else:
        parser.add_argument("run_ref", metavar="RUN", help=RUN_HELP)


def add_inspect_arguments(
    parser: argparse.ArgumentParser, *, run: bool = True, json: bool = True
) -> None:
    """What an inspecting command takes besides its own options: ``RUN`` (unless ``run`` is
    False), ``--json`` (unless ``json`` is False), and the store (``--state``/``--ray``)."""
    if run:
        add_run_argument(parser)
    if json:
        add_json_argument(parser)
    add_store_arguments(parser)


def reports_errors(name: str) -> Callable[[Body], Body]:
    """The command ``name``'s ``run``: its body, with a ``CliError`` it raises printed as
    ``subagents NAME: error: ...`` and its exit code returned (any other exception is a
    bug, and goes up)."""

    def wrap(body: Body) -> Body:
        @functools.wraps(body)
        def run(args: argparse.Namespace) -> int:
            try:
                return body(args)
            except CliError as exc:
                return fail(name, exc)

        return run

    return wrap


@contextlib.contextmanager
def store_errors(store: InspectedStore | None = None) -> Iterator[None]:
    """A ``StoreError`` raised inside (the file damaged, locked, the cluster's store lost)
    becomes a ``CliError`` saying it, so the command exits 1 with one line, not a trace;
    given the ``store``, a busy one's line names the stalled hosts likely holding its lock
    (``runtime_args.stalled_holders``), as a command that starts a Runtime does: ``stop``
    and ``send`` write, and said only that the store was locked."""
    from subagents.store.base import StoreBusy, StoreError

    try:
        yield
    except StoreError as exc:
        said = str(exc)
        if store is not None and isinstance(exc, StoreBusy):
            from subagents.cli.runtime_args import stalled_holders

            said += stalled_holders(store)
        raise CliError(said) from exc


class Inspection(NamedTuple):
    """What an inspecting command about one run starts from."""

    store: InspectedStore
    alive: Liveness
    """The hosts alive, read before the run (``state.liveness`` says why)."""
    record: RunRecord
    """The run ``RUN`` names, as the store has it now."""


@contextlib.contextmanager
def inspecting(args: argparse.Namespace) -> Iterator[Inspection]:
    """The store ``args`` names, open for the block (closed after it), the hosts alive, and
    the run ``args.run_ref`` names; a ``StoreError`` inside the block is a ``CliError``."""
    with open_inspected_store(args) as store, store_errors(store):
        alive = liveness(store)  # before the run (state.liveness says why)
        yield Inspection(store, alive, resolve(store, args.run_ref))


def emit(args: argparse.Namespace, value: Any, show: Callable[[], None]) -> int:
    """``value`` as one JSON document with ``--json``, else ``show()`` (the human view); 0."""
    if args.json:
        from subagents.cli import output

        output.print_json(value)
    else:
        show()
    return 0
