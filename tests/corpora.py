"""Where the definition-file corpora are: the synthetic one in the repository, the public one
beside it when present.

Why two: the README's test command must pass on a bare clone, so every behaviour the public
files exercise (unquoted colons, names with spaces, odd tool lists, CRLF, BOMs, tabs, indented
or badly closed frontmatter, duplicates) is also covered by ``tests/corpus/messy``, written
here. The public corpus (372 files people really wrote) is checked too when it is there:
``$SUBAGENTS_CORPUS`` (the ``corpus`` folder or its ``claude-agents`` folder), else
``../shared/corpus`` beside the checkout (CI has it). Tests that need it are skipped with the
reason otherwise; under ``CI=true`` they fail instead (CI must run them, as it must the
PostgreSQL and browser tests), so CI never goes green by skipping them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SYNTHETIC = REPO / "tests" / "corpus" / "messy"
"""The synthetic messy corpus (byte-exact: CRLF and BOM files are kept as written, see
.gitattributes)."""

CORPUS_ENV = "SUBAGENTS_CORPUS"


def public_corpus() -> Path | None:
    """The public ``claude-agents`` folder, or None when it is not on this machine."""
    given = os.environ.get(CORPUS_ENV)
    candidates = [Path(given)] if given else [REPO.parent / "shared" / "corpus"]
    for base in candidates:
        for folder in (base / "claude-agents", base):
            if folder.is_dir() and any(folder.rglob("*.md")):
                return folder
    return None


def require_public_corpus() -> Path:
    """The public corpus, or skip the calling test saying where it was looked for (fail it
    under ``CI=true``)."""
    folder = public_corpus()
    if folder is None:
        where = os.environ.get(CORPUS_ENV) or str(REPO.parent / "shared" / "corpus")
        missing = (
            f"the public definition corpus is not on this machine (looked in {where}; set"
            f" {CORPUS_ENV} to a copy)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the public corpus tests, but {missing}", pytrace=False)
        pytest.skip(f"{missing}: the synthetic corpus in tests/corpus covers its shapes")
    return folder


def definition_files(root: Path) -> list[Path]:
    """The markdown files of a corpus, READMEs left out (loaders skip them)."""
    return sorted(p for p in root.rglob("*.md") if not p.name.lower().startswith("readme"))


class Expected:
    """What a human reading a definition file sees: name, description, tools, model, body.

    A deliberately naive reader (line regexes, no YAML library), independent of the real
    parser, so a bug in the parser cannot hide by agreeing with itself. It reads the shapes
    the corpora have: one key per line, ``>``/``|`` blocks, ``- item`` lists, comma lists,
    ``[a, b]`` lists, CRLF, a BOM, tabs after the colon, frontmatter indented or closed by a
    long dashed line.
    """

    def __init__(self, text: str) -> None:
        text = text.removeprefix("\ufeff").replace("\r\n", "\n")
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.strip())
        assert lines[start].strip() == "---"
        end = next(
            i for i in range(start + 1, len(lines)) if re.fullmatch(r"-{3,}", lines[i].strip())
        )
        header = [line.strip("\n") for line in lines[start + 1 : end]]
        indent = len(lines[start]) - len(lines[start].lstrip())
        header = [line[indent:] if line[:indent].isspace() else line for line in header]
        self.body = "\n".join(lines[end + 1 :]).strip()
        self.values: dict[str, str] = {}
        self.continuations: dict[str, list[str]] = {}
        key = None
        for line in header:
            match = re.match(r"^([A-Za-z_][\w-]*):[ \t]?(.*)$", line)
            if match:
                key = match.group(1)
                self.values[key] = match.group(2).strip()
                self.continuations[key] = []
            elif key is not None:
                self.continuations[key].append(line)

    def has(self, key: str) -> bool:
        return key in self.values

    def scalar(self, key: str) -> str:
        value = self.values[key]
        if value[:1] in (">", "|"):
            return " ".join(" ".join(self.continuations[key]).split())
        if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        return value

    def tools(self) -> tuple[str, ...] | None:
        if "tools" not in self.values:
            return None
        value = self.values["tools"]
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        elif not value:
            items = [line.strip()[1:].strip() for line in self.continuations["tools"]]
            return tuple(item for item in items if item)
        # a tool listed twice is listed once (the loader de-duplicates, keeping the order)
        parts = (part.strip().strip("\"'") for part in value.split(","))
        return tuple(dict.fromkeys(part for part in parts if part))


def check_as_written(root: Path) -> tuple[dict[str, int], list[str]]:
    """Load every definition file under ``root`` and compare it with what ``Expected`` reads
    there; the counts of what was seen and the failures (empty when all is as written)."""
    from subagents.definitions import Level, load_file
    from subagents.definitions.validate import NAME_PATTERN

    counts = dict.fromkeys(
        ["loaded", "unreadable", "loaded: name not kebab-case", "readme skipped"], 0
    )
    counts["readme skipped"] = sum(
        1 for p in root.rglob("*.md") if p.name.lower().startswith("readme")
    )
    failures: list[str] = []
    for path in definition_files(root):
        specs, issues = load_file(path, root=root)
        expected = Expected(path.read_bytes().decode("utf-8"))
        errors = [issue for issue in issues if issue.severity == "error"]
        if not (expected.has("name") and expected.has("description")):
            counts["unreadable"] += 1
            if specs or len(issues) != 1 or issues[0].file != str(path) or issues[0].line is None:
                failures.append(f"{path}: expected one issue with a line, got {issues}")
            continue
        name = expected.scalar("name")
        if not NAME_PATTERN.match(name):
            # not kebab-case ("Python Testing Expert"): loads as written, with one name warning
            counts["loaded: name not kebab-case"] += 1
            text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
            name_line = 2 + next(i for i, ln in enumerate(text.splitlines()) if ln.strip() == "---")
            warned = [i for i in issues if i.reason.startswith(f"name {name!r} is not kebab-case")]
            if len(warned) != 1 or warned[0].severity != "warning" or warned[0].line != name_line:
                failures.append(f"{path}: name {name!r} needs one warning on its line: {issues}")
            elif "loads as written" not in warned[0].reason:
                failures.append(f"{path}: the name warning is unclear: {warned[0].reason}")
        if len(specs) != 1 or errors:
            failures.append(f"{path}: did not load: {issues}")
            continue
        spec = specs[0]
        want = {
            "name": name,
            "description": " ".join(expected.scalar("description").split()),
            "tools": expected.tools(),
            "model": expected.scalar("model") if expected.has("model") else None,
            "prompt": expected.body,
            "level": Level.DIRS,
            "category": path.parent.relative_to(root).as_posix(),
        }
        got = {
            "name": spec.name,
            "description": " ".join(spec.description.split()),
            "tools": spec.tools,
            "model": spec.model,
            "prompt": spec.prompt,
            "level": spec.level,
            "category": spec.category,
        }
        for key, value in want.items():
            if got[key] != value:
                failures.append(f"{path}: {key}: expected {value!r:.120}, got {got[key]!r:.120}")
        counts["loaded"] += 1
        if issues:
            counts["loaded with warnings"] = counts.get("loaded with warnings", 0) + 1
        if spec.tools is not None:
            counts["with tools"] = counts.get("with tools", 0) + 1
        if spec.model is not None:
            counts["with model"] = counts.get("with model", 0) + 1
    return counts, failures
