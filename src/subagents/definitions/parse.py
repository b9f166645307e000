"""Parsing: markdown files, mappings and JSON into ``AgentSpec`` values.

Two kinds of entry points. ``parse_markdown``, ``parse_mapping`` and ``parse_json`` are for a
caller holding one definition: they raise ``DefinitionError`` on the first problem. ``load_file``
is for loaders walking directories: it never raises for a bad file, returning every problem as a
``LoadIssue`` instead, and it refuses oversized, binary and non-UTF-8 files before parsing.
Every spec that leaves this module has passed ``validate``'s error checks.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from subagents.definitions import frontmatter
from subagents.definitions.errors import DefinitionError, LoadIssue
from subagents.definitions.fields import FieldError, camel, spec_kwargs
from subagents.definitions.spec import AgentSpec, Level
from subagents.definitions.validate import KNOWN_TOOLS, check
from subagents.definitions.yamlsafe import MAX_DEPTH, MAX_NODES
from subagents.logs import get_logger

log = get_logger("subagents.definitions")

MAX_FILE_BYTES = 1024 * 1024
_JSON_BYTE = re.compile(r"\(byte (\d+)\)")


def _build(
    data: Mapping[str, Any],
    *,
    prompt: str | None,
    source: str | None,
    category: str,
    level: Level,
    errors: list[FieldError] | None = None,
) -> AgentSpec:
    """A spec from a mapping; raises FieldError (with the key) for a value of the wrong shape,
    or, given ``errors``, collects the errors of such fields there and leaves them out."""
    values = dict(data)
    if prompt is None:
        prompt = _prompt_of(values)
    kwargs, metadata, _ = spec_kwargs(values, errors)
    for required in ("name", "description"):
        if not kwargs.get(required):
            given = required in kwargs
            raise FieldError(
                required,
                f"required field {required!r} is empty"
                if given
                else f"missing required field {required!r}",
            )
    return AgentSpec(
        **kwargs, prompt=prompt, metadata=metadata, source=source, category=category, level=level
    )


_PROMPT_KEYS = ("prompt", "systemPrompt", "system_prompt", "system-prompt")
"""Where a mapping or JSON definition keeps its prompt: ``prompt`` (the Agent SDK's key) or
``systemPrompt`` (Claude Code's JSON key); a markdown file's body is its prompt."""


def _prompt_of(values: dict[str, Any]) -> str:
    """Take the prompt out of ``values`` (any of ``_PROMPT_KEYS``; two that differ are an
    error naming both)."""
    found: dict[str, Any] = {k: values.pop(k) for k in _PROMPT_KEYS if k in values}
    for key, value in found.items():
        if value is not None and not isinstance(value, str):
            raise FieldError(key, f"{key} must be text, got {type(value).__name__}")
    texts = {key: value for key, value in found.items() if value}
    if len(set(texts.values())) > 1:
        first, second = list(texts)[:2]
        raise FieldError(
            second, f"both {first!r} and {second!r} are given, with different values; keep one"
        )
    return next(iter(texts.values()), "")


def _first_error(spec: AgentSpec) -> DefinitionError | None:
    for finding in check(spec):
        if finding.issue.severity == "error":
            return DefinitionError(finding.issue.reason, file=spec.source)
    return None


def parse_mapping(
    data: Mapping[str, Any],
    *,
    prompt: str | None = None,
    source: str | None = None,
    category: str = "",
    level: Level = Level.CODE,
) -> AgentSpec:
    """A spec from a dict (camelCase or snake_case keys); ``prompt`` overrides a ``prompt`` key.

    Raises ``DefinitionError`` naming the field and value at fault.
    """
    if not isinstance(data, Mapping):
        raise DefinitionError(
            f"a definition must be a mapping, not a {type(data).__name__}", file=source
        )
    try:
        spec = _build(data, prompt=prompt, source=source, category=category, level=level)
    except DefinitionError as exc:
        raise exc.with_location(file=source) from None
    error = _first_error(spec)
    if error is not None:
        raise error
    return spec


def _field_lines(key_lines: Mapping[str, int]) -> dict[str, int]:
    """Key lines indexed by camelCase field name as well as by the key as written."""
    lines = dict(key_lines)
    for key, line in key_lines.items():
        lines.setdefault(camel(key), line)
    return lines


def read_markdown(
    text: str,
    *,
    source: str | None = None,
    category: str = "",
    level: Level = Level.DIRS,
    known_tools: frozenset[str] = KNOWN_TOOLS,
    extra_tools: Iterable[str] = (),
    strict: bool = False,
) -> tuple[AgentSpec | None, list[LoadIssue]]:
    """Parse one markdown definition, collecting every issue; the spec is None on an error."""
    try:
        fm = frontmatter.parse(text)
    except DefinitionError as exc:
        return None, [_issue(exc, source, None)]
    issues = [
        LoadIssue(reason=note.reason, file=source, line=note.line, severity="warning")
        for note in fm.notes
    ]
    name = fm.data.get("name") if isinstance(fm.data.get("name"), str) else None
    lines = _field_lines(fm.key_lines)

    def field_issue(exc: FieldError) -> LoadIssue:
        line = lines.get(exc.key, lines.get(camel(exc.key)))
        if line is None and exc.key in ("name", "description"):
            line = fm.header_line
        return _issue(exc, source, name, line=line)

    bad_fields: list[FieldError] = []
    try:
        spec = _build(
            fm.data,
            prompt=fm.body.strip(),
            source=source,
            category=category,
            level=level,
            errors=bad_fields,
        )
    except FieldError as exc:
        return None, [*issues, *map(field_issue, bad_fields), field_issue(exc)]
    issues.extend(field_issue(exc) for exc in bad_fields)  # every bad field, with its line
    findings = check(spec, known_tools=known_tools, extra_tools=extra_tools, strict=strict)
    for finding in findings:
        line = fm.body_line if finding.field is None else lines.get(finding.field)
        issues.append(msgspec.structs.replace(finding.issue, line=line))
    issues.sort(key=lambda issue: issue.line or 0)  # in the order of the file (stable)
    if any(issue.severity == "error" for issue in issues):
        return None, issues
    return spec, issues


def _issue(
    exc: DefinitionError, source: str | None, name: str | None, line: int | None = None
) -> LoadIssue:
    return LoadIssue(
        reason=exc.reason,
        file=exc.file or source,
        line=exc.line if exc.line is not None else line,
        name=name,
        severity="error",
    )


def parse_markdown(
    text: str, *, source: str | None = None, category: str = "", level: Level = Level.DIRS
) -> AgentSpec:
    """A spec from a markdown definition (frontmatter + body); raises ``DefinitionError``.

    Lenient readings (see ``frontmatter``) are accepted silently here; ``load_file`` reports them.
    """
    spec, issues = read_markdown(text, source=source, category=category, level=level)
    if spec is None:
        error = next(issue for issue in issues if issue.severity == "error")
        raise error.as_error()
    return spec


def _json_entries(value: Any, source: str | None) -> list[tuple[str, Any]]:
    """(label, mapping) pairs from the three accepted JSON shapes."""
    if isinstance(value, list):
        return [(f"item {index}", item) for index, item in enumerate(value)]
    if not isinstance(value, dict):
        raise DefinitionError(
            f"JSON definitions must be an object or a list of objects, not {type(value).__name__}",
            file=source,
        )
    if isinstance(value.get("name"), str):
        return [("object", value)]
    entries: list[tuple[str, Any]] = []
    for name, body in value.items():
        if not isinstance(body, dict):
            raise DefinitionError(
                f"agent {name!r}: expected an object with 'description' and 'prompt' "
                f"(the --agents shape), got {type(body).__name__}",
                file=source,
            )
        if "name" in body and body["name"] != name:
            raise DefinitionError(
                f"agent {name!r}: its 'name' field says {body['name']!r}", file=source
            )
        entries.append((f"agent {name!r}", {**body, "name": name}))
    return entries


def _check_json_shape(value: Any, source: str | None) -> None:
    """Refuse a document nested deeper, or larger, than YAML frontmatter may be (the same
    bounds, ``yamlsafe.MAX_DEPTH`` and ``MAX_NODES``): a definition never needs more, and a
    crafted one must cost a clear error, not a RecursionError. Walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise DefinitionError(
                f"JSON document refused: more than {MAX_NODES} values", file=source
            )
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise DefinitionError(
                    f"JSON document refused: nesting deeper than {MAX_DEPTH} levels", file=source
                )
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)


def _decode_json(text: str | bytes, source: str | None) -> Any:
    try:
        value = msgspec.json.decode(text)
    except RecursionError:  # msgspec's own bound, far deeper than ours
        raise DefinitionError(
            f"JSON document refused: nesting deeper than {MAX_DEPTH} levels", file=source
        ) from None
    except msgspec.DecodeError as exc:
        message = str(exc)
        line = None
        match = _JSON_BYTE.search(message)
        if match:
            raw = text.encode() if isinstance(text, str) else text
            line = raw[: int(match.group(1))].count(b"\n") + 1
        raise DefinitionError(f"invalid JSON: {message}", file=source, line=line) from None
    _check_json_shape(value, source)
    return value


def read_json(
    text: str | bytes,
    *,
    source: str | None = None,
    level: Level = Level.CODE,
    known_tools: frozenset[str] = KNOWN_TOOLS,
    extra_tools: Iterable[str] = (),
    strict: bool = False,
) -> tuple[list[AgentSpec], list[LoadIssue]]:
    """Every definition in a JSON document, collecting issues per entry instead of raising."""
    try:
        entries = _json_entries(_decode_json(text, source), source)
    except DefinitionError as exc:
        return [], [_issue(exc, source, None)]
    specs: list[AgentSpec] = []
    issues: list[LoadIssue] = []
    for label, entry in entries:
        name = entry.get("name") if isinstance(entry, dict) else None
        bad_fields: list[FieldError] = []
        try:
            if not isinstance(entry, dict):
                raise DefinitionError(f"must be an object, got {type(entry).__name__}")
            spec = _build(
                entry, prompt=None, source=source, category="", level=level, errors=bad_fields
            )
        except DefinitionError as exc:
            for error in [*bad_fields, exc]:
                issues.append(_issue(DefinitionError(f"{label}: {error.reason}"), source, name))
            continue
        found = [
            _issue(DefinitionError(f"{label}: {error.reason}"), source, name)
            for error in bad_fields
        ]
        found.extend(
            f.issue
            for f in check(spec, known_tools=known_tools, extra_tools=extra_tools, strict=strict)
        )
        issues.extend(found)
        if not any(issue.severity == "error" for issue in found):
            specs.append(spec)
    return specs, issues


def parse_json(
    text: str | bytes, *, source: str | None = None, level: Level = Level.CODE
) -> list[AgentSpec]:
    """Specs from JSON: one object, a list of objects, or the Agent SDK ``--agents`` shape
    ``{"name": {"description", "prompt", "tools", "model"}}``. Raises ``DefinitionError``."""
    specs, issues = read_json(text, source=source, level=level)
    for issue in issues:
        if issue.severity == "error":
            raise issue.as_error()
    return specs


def _category(source: str, root: str | None) -> str:
    """The folder of ``source`` below ``root``, as a posix path ('' at the root or outside it).

    Plain string work for the usual case (``source`` found by walking ``root``); anything
    else goes through ``pathlib``, which normalises both sides.
    """
    if root is None:
        return ""
    folder = os.path.dirname(source)
    if folder == root:
        return ""
    if os.sep == "/" and folder.startswith(root) and folder[len(root) : len(root) + 1] == "/":
        rest = folder[len(root) + 1 :]
        if rest and "//" not in rest and "/./" not in f"/{rest}/" and "/../" not in f"/{rest}/":
            return rest
    try:
        relative = Path(folder).relative_to(Path(root))
    except ValueError:
        return ""
    text = relative.as_posix()
    return "" if text == "." else text


def read_file_text(path: str | os.PathLike[str], *, head: int | None = None) -> str:
    """A definition file's text; ``DefinitionError`` if missing, too big, binary or not UTF-8.

    The size is checked with ``stat`` first and the read is capped, so a huge file is refused
    without being read whole. ``head`` reads only about that many bytes (whole lines), for
    callers that need just the frontmatter. The read asks for the size ``stat`` gave (plus
    one byte, to notice a file that grew): asking for the 1 MiB cap itself made every read
    allocate and release a 1 MiB buffer, most of a cold load's reading time.
    """
    source = os.fspath(path)
    try:
        info = os.stat(source)
        if not stat.S_ISREG(info.st_mode):
            raise DefinitionError("not a regular file", file=source)
        size = info.st_size
        if size > MAX_FILE_BYTES:
            raise DefinitionError(
                f"file is {size} bytes, over the 1 MiB limit for definitions; not read",
                file=source,
            )
        with open(source, "rb") as handle:
            if head is not None:
                raw = handle.read(head)
            else:
                raw = handle.read(size + 1)
                if len(raw) > size:  # it grew since the stat: read on, up to the cap
                    raw += handle.read(MAX_FILE_BYTES + 1 - len(raw))
    except FileNotFoundError:
        raise DefinitionError("file not found", file=source) from None
    except OSError as exc:
        raise DefinitionError(f"cannot read file: {exc.strerror or exc}", file=source) from None
    if head is not None and size > head:
        raw = raw[: raw.rfind(b"\n") + 1]
    elif len(raw) > MAX_FILE_BYTES:
        raise DefinitionError("file grew over the 1 MiB limit while being read", file=source)
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise DefinitionError(
            f"binary file (a NUL byte at offset {nul}); not a text definition",
            file=source,
            line=raw[:nul].count(b"\n") + 1,
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DefinitionError(
            f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {column} cannot be decoded; "
            "save the file as UTF-8",
            file=source,
            line=line,
        ) from None


def load_file(
    path: Path, *, root: Path | None = None, level: Level = Level.DIRS
) -> tuple[list[AgentSpec], list[LoadIssue]]:
    """Every definition in one file (markdown, or ``.json``) and every issue; never raises.

    ``root`` is the directory the file was found under: its folder path below ``root`` becomes
    the spec's category.
    """
    return read_file(path, root=root, level=level)


def read_file(
    path: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    level: Level = Level.DIRS,
    known_tools: frozenset[str] = KNOWN_TOOLS,
    extra_tools: Iterable[str] = (),
    strict: bool = False,
) -> tuple[list[AgentSpec], list[LoadIssue]]:
    """``load_file`` with the validation settings of a loader (paths as ``str`` or ``Path``:
    the loader passes the strings its folder walk produced, without building a ``Path``)."""
    source = os.fspath(path)
    try:
        text = read_file_text(path)
    except DefinitionError as exc:
        return [], [_issue(exc, source, None)]
    try:
        if os.path.splitext(source)[1].lower() == ".json":
            return read_json(
                text,
                source=source,
                level=level,
                known_tools=known_tools,
                extra_tools=extra_tools,
                strict=strict,
            )
        spec, issues = read_markdown(
            text,
            source=source,
            category=_category(source, None if root is None else os.fspath(root)),
            level=level,
            known_tools=known_tools,
            extra_tools=extra_tools,
            strict=strict,
        )
    except Exception as exc:  # a bug of ours must cost one file, not the whole load
        log.exception("definition parser failed", file=source)
        return [], [
            LoadIssue(
                reason=f"internal error while parsing ({type(exc).__name__}: {exc}); "
                "please report it with this file",
                file=source,
                severity="error",
            )
        ]
    return ([spec] if spec is not None else []), issues
