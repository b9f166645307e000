"""Discovery: which definition files exist, which definition wins each name, and what changed.

Sources are scanned in priority order (code, project, named dirs, user, built-in). A name
defined at two levels goes to the higher one, and the loser is reported (``Shadowed`` and a log
line), because silently using a different agent than the file one is editing is the classic
surprise. Within one level the first file found wins (folders in the order given, files in
sorted path order) and the duplicate is a warning naming both files (``LoadResult.duplicates``
and an issue). Two files of one name are said at WARNING level, once, naming both and which
one is used, so a person sees it without ``-v``: `subagents run lead --agents ./agents` used to
run one of two leads without a word. A file overriding a built-in definition, or code
overriding a file, is what they are for: that is said at INFO.

``DefinitionLoader`` keeps a per-file cache keyed on (mtime, size): ``reload`` lists the
directories again, re-parses only new or changed files and forgets deleted ones; shadowing and
``extends`` are recomputed from the cache, which costs microseconds per definition. A
definition may extend a built-in agent (``extends: explore``) whether or not the built-in
folder is one of the sources: ``Runtime(agent_dirs=[...])`` without ``discover`` used to drop
such a team's members with only a log line.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import msgspec

from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.extends import resolve_extends
from subagents.definitions.parse import read_file
from subagents.definitions.spec import AgentSpec, Level
from subagents.definitions.validate import KNOWN_TOOLS, validate
from subagents.logs import get_logger

log = get_logger("subagents.definitions")

CODE_SOURCE = "<code>"
DEFINITION_SUFFIXES = (".md",)
BUILTIN_DIR = Path(__file__).resolve().parent.parent / "builtin_agents"


class Source(msgspec.Struct, frozen=True):
    """A directory of definitions and the level its definitions get."""

    path: str
    level: Level


class Shadowed(msgspec.Struct, frozen=True):
    """A definition hidden by a higher-priority one of the same name (files, or ``<code>``)."""

    name: str
    winner: str | None
    loser: str | None


class LoadResult(msgspec.Struct, frozen=True):
    """Everything one load produced: the winning specs by name and what went wrong.
    ``shadowed``: names defined at two levels; ``duplicates``: twice at one level (each also
    an issue)."""

    specs: dict[str, AgentSpec]
    issues: list[LoadIssue]
    shadowed: list[Shadowed]
    files_scanned: int
    files_loaded: int
    duplicates: list[Shadowed] = msgspec.field(default_factory=list)

    @property
    def errors(self) -> list[LoadIssue]:
        """The issues that dropped a definition (or, in strict mode, would fail a check)."""
        return [issue for issue in self.issues if issue.severity == "error"]

    def raise_for_errors(self) -> None:
        """Raise the first error as ``DefinitionError`` (for callers that want strictness)."""
        errors = self.errors
        if errors:
            first = errors[0]
            more = f" (and {len(errors) - 1} more errors)" if len(errors) > 1 else ""
            raise DefinitionError(first.reason + more, file=first.file, line=first.line)


class Changes(msgspec.Struct, frozen=True):
    """Names whose winning definition appeared, changed or disappeared since the last load."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


def _nearest_project_dir(cwd: Path, home: Path) -> Path | None:
    user_dir = home / ".claude" / "agents"
    for folder in (cwd, *cwd.parents):
        candidate = folder / ".claude" / "agents"
        if candidate.is_dir():
            return None if _same(candidate, user_dir) else candidate
    return None


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a == b


def default_sources(
    *,
    cwd: Path | None = None,
    dirs: Sequence[Path] = (),
    home: Path | None = None,
    include_builtin: bool = True,
) -> list[Source]:
    """The standard search path, highest priority first.

    The nearest ``.claude/agents/`` walking up from ``cwd`` (PROJECT; not the user's own, which
    a walk from inside the home directory would find), each of ``dirs`` (DIRS, kept even when
    missing so the loader warns about them), ``~/.claude/agents/`` if it exists (USER), and the
    package's built-in defaults (BUILTIN).
    """
    cwd = (cwd or Path.cwd()).absolute()
    home = home or Path.home()
    sources: list[Source] = []
    project = _nearest_project_dir(cwd, home)
    if project is not None:
        sources.append(Source(str(project), Level.PROJECT))
    sources.extend(Source(str(Path(d)), Level.DIRS) for d in dirs)
    user_dir = home / ".claude" / "agents"
    if user_dir.is_dir():
        sources.append(Source(str(user_dir), Level.USER))
    if include_builtin:
        sources.append(Source(str(BUILTIN_DIR), Level.BUILTIN))
    return sources


def _is_readme(name: str) -> bool:
    return name.lower().split(".", 1)[0] == "readme"


def _walk(root: str) -> Iterator[str]:
    """Definition files under ``root``, recursively, skipping READMEs and hidden entries.

    Symlinked folders are followed once each: a link back up the tree cannot loop. Paths are
    plain strings (``os.scandir``'s): a hot-reload poll walks every folder each second, and
    building a ``Path`` per entry was most of an unchanged poll's time.
    """
    stack = [root]
    visited: set[tuple[int, int]] = set()
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder)
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in visited:
            continue
        visited.add((info.st_dev, info.st_ino))
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                is_folder = entry.is_dir()
            except OSError:  # a loop of links: taken as a file, whose read names what is wrong
                yield entry.path  # (it was skipped without a word, a definition lost unsaid;
                continue  # whatever its name: one named like a folder may have held some)
            if is_folder:
                stack.append(entry.path)
            elif entry.name.lower().endswith(DEFINITION_SUFFIXES) and not _is_readme(entry.name):
                yield entry.path


def _stamp(path: str) -> tuple[int, int]:
    """(mtime in ns, size): a file whose stamp is unchanged is not read again."""
    try:
        info = os.stat(path)
    except OSError:
        return _NO_STAMP
    return (info.st_mtime_ns, info.st_size)


_NO_STAMP = (-1, -1)


class _Listing(msgspec.Struct, frozen=True):
    """What a scan found before reading anything: per source, whether it is a folder, and
    its files in order with their stamps. Equal listings mean an unchanged set of files."""

    sources: tuple[tuple[bool, bool], ...]  # (exists, is a folder) per source
    files: tuple[tuple[int, str, tuple[int, int]], ...]  # (source index, path, stamp)


class _Cached(msgspec.Struct):
    stamp: tuple[int, int]
    specs: list[AgentSpec]
    issues: list[LoadIssue]


class DefinitionLoader:
    """Loads definitions from ``sources`` plus those registered in code; caches per file."""

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        registered: Sequence[AgentSpec] = (),
        strict: bool = False,
        extra_tools: Sequence[str] = (),
        known_tools: frozenset[str] = KNOWN_TOOLS,
    ) -> None:
        """``known_tools``: the tool names definitions may list (``validate.known_tools``
        of what the runtime has); ``extra_tools`` adds to them; ``strict`` makes an unknown
        tool an error instead of a warning."""
        self._sources = _dedupe(sources)
        self._strict = strict
        self._extra_tools = tuple(extra_tools)
        self._known_tools = known_tools
        self._registered: dict[str, AgentSpec] = {}
        self._registered_issues: dict[str, list[LoadIssue]] = {}
        self._cache: dict[tuple[int, str], _Cached] = {}
        self._last: LoadResult | None = None
        self._last_listing: _Listing | None = None  # None: the next scan reads everything
        self._logged_conflicts: set[Shadowed] = set()
        for spec in registered:
            self.register(spec)

    # -- code-level definitions ------------------------------------------------------------

    def register(self, spec: AgentSpec) -> None:
        """Add (or replace) a definition at CODE level, the highest priority.

        Raises ``DefinitionError`` if the spec has an error (bad name, limits...); its warnings
        are reported with the next load.
        """
        if spec.level != Level.CODE:
            spec = msgspec.structs.replace(spec, level=Level.CODE)
        issues = validate(
            spec,
            known_tools=self._known_tools,
            extra_tools=self._extra_tools,
            strict=self._strict,
        )
        for issue in issues:
            if issue.severity == "error":
                raise issue.as_error()
        self._registered[spec.name] = spec
        self._registered_issues[spec.name] = issues
        self._last_listing = None

    def unregister(self, name: str) -> bool:
        """Forget a definition registered in code; False if there was none by that name."""
        self._registered_issues.pop(name, None)
        self._last_listing = None
        return self._registered.pop(name, None) is not None

    # -- loading ---------------------------------------------------------------------------

    @property
    def files(self) -> list[str]:
        """The definition files seen by the last load, sorted."""
        return sorted(path for _, path in self._cache)

    @property
    def sources(self) -> list[Source]:
        return list(self._sources)

    def load(self) -> LoadResult:
        """A full scan: every file parsed again."""
        self._cache.clear()
        result = self._scan(self._list())
        self._last = result
        return result

    def reload(self) -> tuple[LoadResult, Changes]:
        """Re-parse only new or changed files (mtime or size); report what changed by name.

        When no file appeared, disappeared or changed stamp (and nothing was registered or
        unregistered in code), the previous result is returned as it is: an unchanged poll
        costs the folder listings and a ``stat`` per file, nothing else.
        """
        listing = self._list()
        if self._last is not None and listing == self._last_listing:
            return self._last, Changes()
        previous = self._last.specs if self._last is not None else {}
        result = self._scan(listing)
        self._last = result
        return result, _diff(previous, result.specs)

    def _list(self) -> _Listing:
        sources: list[tuple[bool, bool]] = []
        files: list[tuple[int, str, tuple[int, int]]] = []
        for index, source in enumerate(self._sources):
            is_dir = os.path.isdir(source.path)
            sources.append((is_dir or os.path.exists(source.path), is_dir))
            if is_dir:
                files.extend((index, path, _stamp(path)) for path in sorted(_walk(source.path)))
        return _Listing(tuple(sources), tuple(files))

    def _scan(self, listing: _Listing) -> LoadResult:
        issues: list[LoadIssue] = []
        candidates: list[tuple[Level, str, AgentSpec]] = [
            (Level.CODE, CODE_SOURCE, spec) for spec in self._registered.values()
        ]
        for name in self._registered:
            issues.extend(self._registered_issues.get(name, ()))
        files = iter(listing.files)
        pending = next(files, None)
        seen: set[tuple[int, str]] = set()
        files_scanned = files_loaded = 0
        for index, source in enumerate(self._sources):
            exists, is_dir = listing.sources[index]
            if not is_dir:
                reason = "not a directory" if exists else "directory not found"
                issues.append(
                    LoadIssue(reason=f"{reason}; no definitions loaded from it", file=source.path)
                )
                continue
            root = source.path
            while pending is not None and pending[0] == index:
                _, path, stamp = pending
                pending = next(files, None)
                key = (index, path)
                seen.add(key)
                files_scanned += 1
                cached = self._read(key, stamp, root, source.level)
                issues.extend(cached.issues)
                if cached.specs:
                    files_loaded += 1
                candidates.extend((source.level, path, spec) for spec in cached.specs)
        self._last_listing = listing
        for key in set(self._cache) - seen:
            del self._cache[key]
        picked = _pick_winners(candidates)
        issues.extend(picked.issues)
        resolved, extends_issues = resolve_extends(picked.winners, builtin_bases())
        issues.extend(extends_issues)
        self._log_conflicts(picked)
        log.debug(
            "definitions loaded",
            definitions=len(resolved),
            files_scanned=files_scanned,
            files_loaded=files_loaded,
            issues=len(issues),
        )
        return LoadResult(
            specs=resolved,
            issues=issues,
            shadowed=picked.shadowed,
            files_scanned=files_scanned,
            files_loaded=files_loaded,
            duplicates=picked.duplicates,
        )

    def _log_conflicts(self, picked: _Picked) -> None:
        """Each name defined twice, said once (hot reload polls every second): at WARNING
        when both are files a person wrote, at INFO when a file overrides a built-in or code
        a file (what overriding is for)."""
        said = self._logged_conflicts
        for record in picked.duplicates:
            if record not in said:
                log.warning(
                    "agent defined twice",
                    agent=record.name,
                    winner=record.winner,
                    loser=record.loser,
                    rule="at one level the first found wins: folders in the order given,"
                    " files in path order",
                )
        for record in picked.shadowed:
            if record not in said:
                say = log.info if record in picked.deliberate else log.warning
                say(
                    "definition shadowed",
                    agent=record.name,
                    winner=record.winner,
                    loser=record.loser,
                    rule=picked.rules[record],
                )
        self._logged_conflicts = {*picked.duplicates, *picked.shadowed}

    def _read(
        self, key: tuple[int, str], stamp: tuple[int, int], root: str, level: Level
    ) -> _Cached:
        cached = self._cache.get(key)
        if cached is not None and cached.stamp == stamp and stamp != _NO_STAMP:
            return cached
        specs, issues = read_file(
            key[1],
            root=root,
            level=level,
            known_tools=self._known_tools,
            extra_tools=self._extra_tools,
            strict=self._strict,
        )
        fresh = _Cached(stamp, specs, issues)
        self._cache[key] = fresh
        return fresh


@functools.cache
def builtin_bases() -> Mapping[str, AgentSpec]:
    """The package's built-in agents by name, read once: the parents any definition may
    extend (they ship with the package and are tested, so their issues are not repeated)."""
    bases: dict[str, AgentSpec] = {}
    for path in sorted(_walk(str(BUILTIN_DIR))):
        specs, _ = read_file(path, root=BUILTIN_DIR, level=Level.BUILTIN)
        bases.update((spec.name, spec) for spec in specs)
    return bases


def _dedupe(sources: Sequence[Source]) -> list[Source]:
    """Drop a directory listed twice, keeping its highest-priority (first) listing."""
    kept: list[Source] = []
    seen: set[str] = set()
    for source in sorted(enumerate(sources), key=lambda item: (item[1].level, item[0])):
        path = Path(source[1].path)
        try:
            key = str(path.resolve())
        except OSError:
            key = str(path)
        if key not in seen:
            seen.add(key)
            kept.append(source[1])
    return kept


class _Picked(msgspec.Struct):
    """The winner of each name, and the definitions that lost: ``shadowed`` at a lower
    level (``deliberate``: a built-in overridden, or a file by code; ``rules``: why each
    lost), ``duplicates`` at the same level (each also in ``issues``)."""

    winners: dict[str, AgentSpec]
    shadowed: list[Shadowed]
    duplicates: list[Shadowed]
    issues: list[LoadIssue]
    deliberate: set[Shadowed]
    rules: dict[Shadowed, str]


def _pick_winners(candidates: list[tuple[Level, str, AgentSpec]]) -> _Picked:
    """First candidate per name wins (candidates come in priority order)."""
    winners: dict[str, tuple[Level, str, AgentSpec]] = {}
    picked = _Picked({}, [], [], [], set(), {})
    for level, origin, spec in candidates:
        current = winners.get(spec.name)
        if current is None:
            winners[spec.name] = (level, origin, spec)
            continue
        record = Shadowed(name=spec.name, winner=current[1], loser=origin)
        if current[0] == level:
            picked.duplicates.append(record)
            picked.issues.append(
                LoadIssue(
                    reason=f"duplicate name {spec.name!r}: defined in {current[1]} and in "
                    f"{origin}; using {current[1]}",
                    file=origin,
                    name=spec.name,
                )
            )
            continue
        picked.shadowed.append(record)
        picked.rules[record] = f"{current[0].label} definitions win over {level.label} ones"
        if current[0] == Level.CODE or level == Level.BUILTIN:
            picked.deliberate.add(record)
    picked.winners = {name: entry[2] for name, entry in winners.items()}
    return picked


def _diff(before: dict[str, AgentSpec], after: dict[str, AgentSpec]) -> Changes:
    return Changes(
        added=tuple(sorted(set(after) - set(before))),
        changed=tuple(sorted(n for n in set(after) & set(before) if after[n] != before[n])),
        removed=tuple(sorted(set(before) - set(after))),
    )
