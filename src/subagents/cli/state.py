"""What every inspecting sub-command shares: the store, run references, the last listing.

Why here: `ps`, `info`, `log`, `tree`, `stop`, `send` and `run` all open the same durable
store (``--state PATH`` or the user's default, see ``store.paths``) and all accept the same
ways of naming a run:

- a full run id;
- a unique prefix of one (``r1a2014``), or a unique suffix of six characters or more (the live
  tree and the summaries show the last eight characters of each id);
- ``#N``: row N of the last plain ``subagents ps`` listing of that store, the one a person
  read (``ps --json`` leaves it alone); kept in a small private file next to the database,
  so it survives between commands.

An ambiguous reference is an error that lists the matches; nothing is guessed.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from subagents.logs import printable

if TYPE_CHECKING:  # imported when used: `subagents CMD --help` must not pay for them
    from collections.abc import Iterable
    from typing import Protocol, Self

    from subagents.messages import RunRecord, RunStatus
    from subagents.store.base import DamagedRow, RunStore
    from subagents.store.leases import Liveness

    class InspectedStore(RunStore, Protocol):
        """What the inspecting commands use of a store: a local ``SQLiteStore``, a
        ``PostgresStore``, or a cluster's ``ClusterStore`` (``subagents.cluster``), which
        offer the same."""

        @property
        def path(self) -> Path: ...

        def list_runs(
            self,
            *,
            statuses: Iterable[RunStatus] | None = None,
            root_run_id: str | None = None,
            agent: str | None = None,
            limit: int | None = None,
            include_archived: bool = False,
            damaged: list[DamagedRow] | None = None,
        ) -> list[RunRecord]: ...

        def __enter__(self) -> Self: ...

        def __exit__(self, *exc: object) -> None: ...


LAST_LISTING = "last-ps.json"
STATE_ENV = "SUBAGENTS_STATE"
"""``--state``'s default (``store.locations.STATE_ENV``)."""
MIN_SUFFIX = 6
MAX_LISTED_MATCHES = 10

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_TIMED_OUT = 3
EXIT_CANCELLED = 4
EXIT_BUDGET = 5

EXIT_FOR_STATUS: dict[str, int] = {
    "completed": EXIT_OK,
    "failed": EXIT_FAILED,
    "timed_out": EXIT_TIMED_OUT,
    "cancelled": EXIT_CANCELLED,
    "budget_exceeded": EXIT_BUDGET,
}
"""The exit code of `subagents run` for each terminal status of its root run (``RunStatus``
values: a RunStatus looks itself up here)."""

EXIT_ORPHANED = 6
"""`wait` and `attach`: the run's host is gone (its lease lapsed); `resume` continues it."""


def live_statuses() -> tuple[RunStatus, ...]:
    """The unfinished statuses."""
    from subagents.messages import RunStatus

    return (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.WAITING)


ORPHANED = "orphaned"
"""What people see instead of an unfinished run's status once its host is gone."""
RESTARTING = "restarting"
"""What people see instead of an unfinished run's status while Ray starts its host again
(a detached tree's host whose process died: ``store.leases.Liveness.restarting``)."""


class CliError(Exception):
    """A problem to report on stderr as ``subagents CMD: error: ...`` with an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


@functools.cache
def _listing_type() -> Any:
    """The rows of the last plain ``ps``, so ``#N`` means what the person just saw."""
    import msgspec

    class Listing(msgspec.Struct, frozen=True):
        store: str
        run_ids: tuple[str, ...]

    return Listing


def _location(text: str) -> Path | str:
    from subagents.store.locations import store_location

    try:
        return store_location(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_state_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state",
        type=_location,
        default=None,
        metavar="PATH|URL",
        help="the run store: a SQLite file, or a PostgreSQL database"
        " (postgresql://user@host:port/db); default: $SUBAGENTS_STATE, else"
        " $SUBAGENTS_STATE_DIR/runs.sqlite3, else $XDG_STATE_HOME/subagents/runs.sqlite3,"
        " else ~/.local/state/subagents/runs.sqlite3",
    )


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """``--state PATH``, and ``--ray ADDRESS``: the inspecting commands read either a local
    file or the store of a Ray cluster (docs/cluster.md)."""
    add_state_argument(parser)
    parser.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="the store of the Ray cluster at ADDRESS (`auto`: the cluster `ray start` runs"
        " on this machine); default: $SUBAGENTS_RAY_ADDRESS when set and --state is not given",
    )


def given_store(args: argparse.Namespace) -> str:
    """The ``--state``/``--ray`` this command was given, as a shell reads them back (quoted;
    a file's path made absolute, a database's password left out), for the commands its
    messages name: copied, they read the same store, not the default one. "" when none was
    given (the default is read: by the copied command too)."""
    import shlex

    from subagents.store.locations import is_database_url, redacted

    said = ""
    state = getattr(args, "state", None)
    if state is not None:
        where = (
            redacted(state) if is_database_url(state) else str(Path(state).expanduser().absolute())
        )
        said += f" --state {shlex.quote(where)}"
    ray = getattr(args, "ray", None)
    if ray is not None:
        said += f" --ray {shlex.quote(ray)}"
    return said


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def open_store(
    location: Path | str | None, *, create: bool = True, named: str | None = None
) -> InspectedStore:
    """The store at ``location`` (a file's path or a database's URL; None: ``--state``'s
    default, ``store.locations.default_location``); ``CliError`` naming it otherwise, and
    where it came from (``named``; else ``--state``, or for the default its variable)."""
    from subagents.store.base import StoreError
    from subagents.store.locations import default_location
    from subagents.store.opening import open_location

    if location is None:
        named = named or default_source()
        try:
            location = default_location()
        except ValueError as exc:
            raise CliError(f"${STATE_ENV}: {exc}", EXIT_USAGE) from exc
    if isinstance(location, Path) and is_directory(location, f"{named or '--state'} {location}"):
        raise CliError(
            f"{named or '--state'} {location}: is a directory; give the database file",
            EXIT_USAGE,
        )
    try:
        return cast("InspectedStore", open_location(location, create=create))
    except StoreError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot open the run store {location}: {exc}") from exc


def stat_of(path: Path, what: str) -> os.stat_result | None:
    """``path``'s status, or None when nothing is there; a path the system refuses to look
    up (a name too long, a folder not searchable, a loop of links) is bad usage naming
    ``what`` and the system's reason. ``Path.exists``/``is_dir`` let those through as an
    ``OSError`` traceback (``--agents``, ``--workspace``, ``--state`` of 100,000 characters)."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise CliError(f"{what}: {exc.strerror or exc}", EXIT_USAGE) from None


def is_directory(path: Path, what: str) -> bool:
    """Whether ``path`` is a directory (``stat_of``: a refused look-up is bad usage)."""
    found = stat_of(path, what)
    return found is not None and stat.S_ISDIR(found.st_mode)


def open_existing_store(location: Path | str | None) -> InspectedStore:
    """The store at ``location`` (or the default one) for a command that only reads runs, or
    posts to runs, already recorded (`ps`, `info`, `log`, `tree`, `wait`, `attach`, `stop`,
    `send`, `resume`): a file that is not there, or a database without a store, is a
    ``CliError`` naming it, and nothing is created. Opening would make the folder and an
    empty database, and a mistyped ``--state`` would then print "no runs" instead of saying
    that the path is wrong. Decided here, before any store is opened: only `run` and `demo`
    create a store."""
    from subagents.store.locations import default_location, is_database_url

    given = location
    if location is None:
        try:
            location = default_location()
        except ValueError as exc:
            raise CliError(f"${STATE_ENV}: {exc}", EXIT_USAGE) from exc
    if is_database_url(location):
        return open_store(location, create=False)
    target = Path(location).expanduser()
    where = f"--state {given}" if given is not None else f"{default_source() or '--state'} {target}"
    if stat_of(target, where) is None:
        if given is not None:
            raise CliError(
                f"--state {given}: no run store there (check the path; only `run`"
                " and `demo` create one)"
            )
        source = default_source()
        raise CliError(
            f"no run store at {target}{f' ({source})' if source else ''} yet: nothing has run"
            " with it (`subagents run` and `subagents demo` create it; --state PATH names"
            " another)"
        )
    return open_store(target, named="--state" if given is not None else default_source())


def default_source() -> str | None:
    """The variable the default store's location comes from: ``$SUBAGENTS_STATE``, else
    ``$SUBAGENTS_STATE_DIR``; None when neither is set (an error then says ``--state``)."""
    from subagents.store.paths import STATE_DIR_ENV

    if os.environ.get(STATE_ENV, "").strip():
        return f"${STATE_ENV}"
    return f"${STATE_DIR_ENV}" if os.environ.get(STATE_DIR_ENV) else None


def open_inspected_store(args: argparse.Namespace) -> InspectedStore:
    """The store an inspecting command reads: ``--ray ADDRESS`` (or, without ``--state``
    and ``$SUBAGENTS_STATE``, ``$SUBAGENTS_RAY_ADDRESS``) is a cluster's; else the local
    file or the database, which must hold a store (``open_existing_store``). A database
    named with ``--ray`` (a cluster whose runs it records) is read directly."""
    from subagents.store.locations import is_database_url

    ray: str | None = getattr(args, "ray", None)
    if ray is not None and args.state is not None and not is_database_url(args.state):
        raise CliError("--state and --ray name two stores: give one", EXIT_USAGE)
    if args.state is None and (ray is not None or not os.environ.get(STATE_ENV, "").strip()):
        from subagents.cluster.connect import ClusterError, resolve_address

        try:
            address = resolve_address(ray)
        except ClusterError as exc:
            raise CliError(str(exc), EXIT_USAGE) from exc
        if address is not None:
            return _cluster_store(address)
    return open_existing_store(args.state)


def _cluster_store(address: str) -> InspectedStore:
    from subagents.cluster.connect import ClusterError
    from subagents.cluster.remote_store import open_cluster_store

    try:
        return open_cluster_store(address)
    except ClusterError as exc:
        raise CliError(str(exc)) from exc


def store_label(store: InspectedStore) -> str:
    """How people name ``store``: its file, or its database's URL (without a password)."""
    where = getattr(store, "where", None)
    return where if isinstance(where, str) else str(store.path)


def fail(command: str, exc: CliError) -> int:
    """Print ``exc`` on stderr the way argparse prints usage errors; its exit code.

    Printable: an error names what the store holds (a host name from a lease row, an agent's
    name, an error a run recorded), which another process could have written with terminal
    escape sequences in it."""
    sys.stderr.write(printable(f"subagents {command}: error: {exc}\n"))
    return exc.code


def liveness(store: InspectedStore) -> Liveness:
    """Which hosts of the store's runs are alive now (their leases).

    Read it *before* the runs it judges: a runtime ends its runs before it gives up its
    lease, so a run read after the leases is either ended or hosted by a host that was alive
    a moment ago. Read after, a tree that ended in between looks orphaned (its host's lease
    gone, its runs read while they were still running): `attach`, `wait` and `log -f` then
    stopped with "orphaned" on a tree that had just completed. The other way round, a host
    that took runs up after the leases were read (a `resume`) is not in them yet: so a run
    that looks orphaned is looked up once more in leases read again, after the runs, while
    the store is still open (the watching commands, `attach`, `wait`, `log -f`, ask inside
    it; a listing judged after the store closed keeps the first reading)."""
    from subagents.store.base import StoreError
    from subagents.store.leases import Liveness

    class Rechecked(Liveness):
        again = False

        def orphaned(self, record: RunRecord) -> bool:
            if super().orphaned(record) and not self.again:
                self.again = True
                try:
                    later = Liveness(store.leases())
                except StoreError:  # closed already: the first reading stands
                    return super().orphaned(record)
                self.by_owner.update(later.by_owner)
                self.live = self.live | later.live
            return super().orphaned(record)

    try:  # a cluster's store can tell a detached tree's host being restarted by Ray
        return Rechecked(store.leases(), listed=getattr(store, "host_listed", None))
    except StoreError as exc:
        raise CliError(str(exc)) from exc


def shown_status(record: RunRecord, alive: Liveness) -> str:
    """The status people see: ``orphaned`` for an unfinished run whose host is gone,
    ``restarting`` for one whose host Ray is starting again (a detached tree's)."""
    if alive.restarting(record):
        return RESTARTING
    return ORPHANED if alive.orphaned(record) else str(record.status)


# ---- the last listing ------------------------------------------------------------------------


def listing_path(store: InspectedStore) -> Path:
    """Beside the store's file; for a cluster's store (whose file is on the head node), in
    this machine's state directory, one folder per cluster store."""
    key = getattr(store, "key", None)
    if isinstance(key, str):
        from subagents.store.paths import default_state_dir

        return default_state_dir() / "clusters" / key / LAST_LISTING
    return store.path.parent / LAST_LISTING


def remember_listing(store: InspectedStore, run_ids: Sequence[str]) -> None:
    """Keep the rows of a ``ps`` for ``#N`` (best effort: a read-only dir only loses ``#N``)."""
    import msgspec

    path = listing_path(store)
    with contextlib.suppress(OSError):  # private like the store's own folder
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    data = msgspec.json.encode(_listing_type()(store=str(store.path), run_ids=tuple(run_ids)))
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:  # private like the store (0600): run ids and their order are the user's business
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)  # an existing leftover keeps its mode through O_CREAT
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def last_listing(store: InspectedStore) -> tuple[str, ...]:
    import msgspec

    path = listing_path(store)
    try:
        listing = msgspec.json.decode(path.read_bytes(), type=_listing_type())
    except FileNotFoundError:
        return ()
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CliError(f"{path}: cannot read the last listing ({exc}); run `subagents ps`") from exc
    if listing.store != str(store.path):  # another database in the same folder listed last
        return ()
    run_ids: tuple[str, ...] = listing.run_ids
    return run_ids


# ---- run references --------------------------------------------------------------------------


HINT = "convert it first (e.g. `iconv -f LATIN1 -t UTF-8`)"
"""How to make a text that is not UTF-8 (``utf8_text``, ``cli.text_input``) one."""


def utf8_text(value: str, what: str) -> str:
    """``value`` as given on the command line (``-`` is not stdin here: `approve --reason`);
    ``CliError`` (usage) naming ``what`` and the first offending byte when it is not UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable argv bytes: lone surrogates
        raw = value.encode("utf-8", "surrogateescape")
        byte = raw[len(value[: exc.start].encode("utf-8", "surrogateescape"))]
        raise CliError(
            f"{what} is not UTF-8 text: byte 0x{byte:02x} at character {exc.start}; {HINT}",
            EXIT_USAGE,
        ) from None
    return value


def resolve(store: InspectedStore, ref: str) -> RunRecord:
    """The run ``ref`` names (id, unique prefix or suffix, ``#N``); ``CliError`` otherwise
    (a usage error for one that is not UTF-8, argv's bad bytes: no run holds it, and the
    store's look-up raised a bare ``UnicodeEncodeError``)."""
    ref = utf8_text(ref, "RUN").strip()
    if not ref:
        raise CliError("empty run reference; give a run id, a unique prefix of one, or #N")
    if ref.startswith("#"):
        return _by_row(store, ref)
    record = _get(store, ref)
    if record is not None:
        return record
    ids = all_run_ids(store)
    matches = [i for i in ids if i.startswith(ref)]
    if not matches and len(ref) >= MIN_SUFFIX:
        matches = [i for i in ids if i.endswith(ref)]
    if not matches:
        raise CliError(f"no run matches {ref!r} in {store_label(store)}")
    if len(matches) > 1:
        shown = ", ".join(matches[:MAX_LISTED_MATCHES])
        more = len(matches) - MAX_LISTED_MATCHES
        extra = f" and {more} more" if more > 0 else ""
        raise CliError(f"{ref!r} is ambiguous: it matches {shown}{extra}; give more characters")
    found = _get(store, matches[0])
    if found is None:  # deleted between the two reads
        raise CliError(f"no run matches {ref!r} in {store_label(store)}")
    return found


def _by_row(store: InspectedStore, ref: str) -> RunRecord:
    text = ref[1:]
    if not text.isdigit() or int(text) < 1:
        raise CliError(f"{ref!r}: expected #N with N a row number of the last `subagents ps`")
    rows = last_listing(store)
    if not rows:
        raise CliError(f"{ref}: no listing to pick from; run `subagents ps` first")
    n = int(text)
    if n > len(rows):
        raise CliError(f"{ref}: the last `subagents ps` listed {len(rows)} run(s)")
    record = _get(store, rows[n - 1])
    if record is None:
        raise CliError(f"{ref}: run {rows[n - 1]} is no longer in the store")
    return record


def _get(store: InspectedStore, run_id: str) -> RunRecord | None:
    from subagents.store.base import StoreError

    try:
        return store.get_run(run_id)
    except StoreError as exc:
        raise CliError(str(exc)) from exc


def all_run_ids(store: InspectedStore) -> list[str]:
    """Every run's id: from the ids alone where the store can list them (``SQLiteStore``),
    else from its records."""
    from subagents.store.base import StoreError

    ids = getattr(store, "run_ids", None)
    try:
        if callable(ids):
            return list(ids())
        return [r.run_id for r in store.list_runs(include_archived=True)]
    except StoreError as exc:
        raise CliError(str(exc)) from exc


def short_ids(ids: Sequence[str], universe: Sequence[str], *, minimum: int = 8) -> dict[str, str]:
    """For each of ``ids``, its shortest suffix (at least ``minimum`` characters) that is
    unique among ``universe``: how every view shows a run (``ps``, ``tree``, ``attach``, the
    live tree of ``run``), and a reference every command resolves.

    Why the end, not the start: an id is its start time (hex milliseconds) then 40 random
    bits, so runs started within a minute share their first 8 characters and a prefix would
    have to run into the random part anyway; the last 8 characters are random, so they are
    unique among the runs on screen but for a rare collision, which lengthens the suffix."""
    reversed_ids = short_prefixes(
        [i[::-1] for i in ids], [u[::-1] for u in universe], minimum=minimum
    )
    return {i: printable(reversed_ids[i[::-1]][::-1]) for i in ids}  # the store's text


def short_prefixes(
    ids: Sequence[str], universe: Sequence[str], *, minimum: int = 8
) -> dict[str, str]:
    """For each of ``ids``, its shortest prefix (at least ``minimum`` characters) that is
    unique among ``universe``, as git abbreviates commits.

    Only the ids that share the first ``minimum`` characters of one of ``ids`` can lengthen
    it, so only those are compared (no sort of the whole universe: a store of 100,000 runs)."""
    heads = {run_id[:minimum] for run_id in ids}
    sharing = sorted({i for i in (*universe, *ids) if i[:minimum] in heads})
    position = {run_id: i for i, run_id in enumerate(sharing)}
    result: dict[str, str] = {}
    for run_id in ids:
        i = position[run_id]
        longest = 0
        for j in (i - 1, i + 1):  # sorted: the longest common prefix is with a neighbour
            if 0 <= j < len(sharing):
                longest = max(longest, _common(run_id, sharing[j]))
        result[run_id] = run_id[: max(minimum, longest + 1)]
    return result


def short_id(run_id: str) -> str:
    """A run's id as the live views show it when they do not know every id of the store:
    its last 8 characters (``short_ids`` lengthens it where two runs share them), printable
    (an id is the store's text: one written by another program can hold anything)."""
    return printable(run_id[-8:])


def _common(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
