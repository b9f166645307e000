"""Every public Claude Code definition in the shared corpus loads as its author meant it.

The expectation for each file is computed here by a deliberately naive, independent reader
(line regexes, no YAML library), so a bug in the real parser cannot hide by agreeing with itself.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from subagents.definitions import DefinitionLoader, Level, Source, load_file
from subagents.definitions.validate import NAME_PATTERN

CORPUS = Path(__file__).parents[2].parent / "shared" / "corpus" / "claude-agents"


def _corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(
            f"the shared corpus is missing: expected {CORPUS} (a checkout of /work/shared next "
            "to the repository); this test must not be skipped"
        )
    return CORPUS


def _files() -> list[Path]:
    return sorted(p for p in _corpus().rglob("*.md"))


class Expected:
    """What a human reading the file sees: name, description, tools, model, body."""

    def __init__(self, text: str) -> None:
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
        self.values = {}
        self.continuations: dict[str, list[str]] = {}
        key = None
        for line in header:
            match = re.match(r"^([A-Za-z_][\w-]*):\s?(.*)$", line)
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
        if value == "[]":
            return ()
        if not value:
            items = [line.strip()[1:].strip() for line in self.continuations["tools"]]
            return tuple(item for item in items if item)
        # a tool listed twice is listed once (the loader de-duplicates, keeping the order)
        return tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))


def test_every_definition_in_the_corpus_loads_as_written(capsys: pytest.CaptureFixture[str]):
    counts: Counter[str] = Counter(
        dict.fromkeys(["loaded", "unreadable", "loaded: name not kebab-case", "readme skipped"], 0)
    )
    failures: list[str] = []
    for path in _files():
        if path.name.lower().startswith("readme"):
            counts["readme skipped"] += 1
            continue
        specs, issues = load_file(path, root=_corpus())
        expected = Expected(path.read_text(encoding="utf-8"))
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
            name_line = 2 + next(
                i for i, ln in enumerate(path.read_text().splitlines()) if ln.strip() == "---"
            )
            warned = [i for i in issues if i.reason.startswith(f"name {name!r} is not kebab-case")]
            if len(warned) != 1 or warned[0].severity != "warning" or warned[0].line != name_line:
                failures.append(f"{path}: name {name!r} needs one warning on its line: {issues}")
            elif "loads as written" not in warned[0].reason or "such as '" not in warned[0].reason:
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
            "category": path.parent.relative_to(_corpus()).as_posix(),
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
            counts["loaded with warnings"] += 1
        if spec.tools is not None:
            counts["with tools"] += 1
        if spec.model is not None:
            counts["with model"] += 1
    with capsys.disabled():
        print(f"\ncorpus {CORPUS}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    assert not failures, "\n".join(failures)
    # The corpus README promises more than 300 definitions and at least one of each shape.
    assert counts["loaded"] > 300
    assert counts["with tools"] > 20 and counts["with model"] > 300
    assert counts["readme skipped"] >= 1
    # every file with a name and a description loads; five of them have names with spaces
    assert counts["loaded: name not kebab-case"] == 5


def test_names_written_with_spaces_and_a_slash_load_exactly_as_written():
    folder = _corpus() / "vijaythecoder__awesome-claude-agents/agents/specialized/python"
    want = {
        "devops-cicd-expert.md": ("Python DevOps/CI-CD Expert", "python-devops-ci-cd-expert"),
        "testing-expert.md": ("Python Testing Expert", "python-testing-expert"),
    }
    for file, (name, hint) in want.items():
        specs, issues = load_file(folder / file, root=_corpus())
        assert [s.name for s in specs] == [name], issues
        [warning] = [i for i in issues if i.reason.startswith("name ")]
        assert warning.severity == "warning" and warning.name == name
        assert "spawn and mail must use it exactly" in warning.reason
        assert f"such as {hint!r}" in warning.reason
    result = DefinitionLoader([Source(str(folder), Level.DIRS)]).load()
    assert {"Python DevOps/CI-CD Expert", "Python Testing Expert"} <= set(result.specs)


def test_the_known_messy_files_load_with_a_warning_each():
    root = _corpus()
    messy = {
        # unquoted ': ' inside a one-line description (strict YAML rejects it)
        "vijaythecoder__awesome-claude-agents/agents/specialized/rails/rails-backend-expert.md": (
            "rails-backend-expert",
            "not strict YAML",
        ),
        # a long dashed line where the closing '---' should be
        "vijaythecoder__awesome-claude-agents/agents/universal/frontend-developer.md": (
            "frontend-developer",
            "dashes",
        ),
        # frontmatter indented after a blank line
        "0xfurai__claude-code-subagents/agents/sqs-expert.md": ("sqs-expert", "indented"),
    }
    for relative, (name, remark) in messy.items():
        path = root / relative
        specs, issues = load_file(path, root=root)
        assert [s.name for s in specs] == [name], issues
        assert any(remark in issue.reason and issue.line for issue in issues), issues
        assert all(issue.severity == "warning" for issue in issues)
    rails = load_file(root / next(iter(messy)), root=root)[0][0]
    assert "Examples: <example>Context: Rails" in rails.description
    assert rails.tools is None


def test_the_loader_over_the_whole_corpus_reports_duplicates_by_both_files():
    root = _corpus()
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    loaded_names = Counter()
    for path in _files():
        if not path.name.lower().startswith("readme"):
            loaded_names.update(spec.name for spec in load_file(path, root=root)[0])
    duplicates = {name: n for name, n in loaded_names.items() if n > 1}
    assert duplicates, "the corpus is known to have duplicate names"
    assert set(result.specs) == set(loaded_names)
    assert result.files_scanned == sum(
        1 for p in _files() if not p.name.lower().startswith("readme")
    )
    dup_issues = [i for i in result.issues if i.reason.startswith("duplicate name")]
    assert len(dup_issues) == sum(n - 1 for n in duplicates.values())
    for issue in dup_issues:
        assert issue.name in duplicates and issue.severity == "warning"
        winner = result.specs[issue.name].source
        assert winner is not None and winner in issue.reason and str(issue.file) in issue.reason
        assert winner < str(issue.file)  # first in sorted path order wins
    assert not result.shadowed  # one level only: duplicates are not shadowing
