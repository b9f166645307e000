"""Every public Claude Code definition in the public corpus loads as its author meant it.

The public corpus sits beside the checkout (where ``corpora.public_corpus`` looks) or where
``$SUBAGENTS_CORPUS`` says; without it these tests are skipped with the reason (they fail
under ``CI=true``: CI has the corpus), and
``test_messy_corpus.py`` covers the same shapes with files kept in the repository. The
expectation for each file is computed by a deliberately naive, independent reader
(``corpora.Expected``), so a bug in the real parser cannot hide by agreeing with itself.
"""

from __future__ import annotations

from collections import Counter

import pytest

from corpora import check_as_written, definition_files, require_public_corpus
from subagents.definitions import DefinitionLoader, Level, Source, load_file


def test_every_definition_in_the_corpus_loads_as_written(capsys: pytest.CaptureFixture[str]):
    corpus = require_public_corpus()
    counts, failures = check_as_written(corpus)
    with capsys.disabled():
        print(f"\ncorpus {corpus}: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    assert not failures, "\n".join(failures)
    # The corpus README promises more than 300 definitions and at least one of each shape.
    assert counts["loaded"] > 300
    assert counts["with tools"] > 20 and counts["with model"] > 300
    assert counts["readme skipped"] >= 1
    # every file with a name and a description loads; five of them have names with spaces
    assert counts["loaded: name not kebab-case"] == 5


@pytest.mark.parametrize("ci", ["true", ""])
def test_a_missing_public_corpus_skips_but_fails_in_ci(
    tmp_path, monkeypatch: pytest.MonkeyPatch, ci: str
):
    """A bare clone (nothing beside it) skips the corpus tests, saying where it looked; CI,
    where ``../shared`` is present, must not go green by skipping them."""
    monkeypatch.setenv("SUBAGENTS_CORPUS", str(tmp_path))
    monkeypatch.setenv("CI", ci)
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as raised:
        require_public_corpus()
    assert f"looked in {tmp_path}" in str(raised.value)
    assert type(raised.value) is (pytest.fail.Exception if ci else pytest.skip.Exception)


def test_names_written_with_spaces_and_a_slash_load_exactly_as_written():
    root = require_public_corpus()
    folder = root / "vijaythecoder__awesome-claude-agents/agents/specialized/python"
    want = {
        "devops-cicd-expert.md": ("Python DevOps/CI-CD Expert", "python-devops-ci-cd-expert"),
        "testing-expert.md": ("Python Testing Expert", "python-testing-expert"),
    }
    for file, (name, hint) in want.items():
        specs, issues = load_file(folder / file, root=root)
        assert [s.name for s in specs] == [name], issues
        [warning] = [i for i in issues if i.reason.startswith("name ")]
        assert warning.severity == "warning" and warning.name == name
        assert "spawn and mail must use it exactly" in warning.reason
        assert f"such as {hint!r}" in warning.reason
    result = DefinitionLoader([Source(str(folder), Level.DIRS)]).load()
    assert {"Python DevOps/CI-CD Expert", "Python Testing Expert"} <= set(result.specs)


def test_the_known_messy_files_load_with_a_warning_each():
    root = require_public_corpus()
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
    root = require_public_corpus()
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    loaded_names = Counter()
    for path in definition_files(root):
        loaded_names.update(spec.name for spec in load_file(path, root=root)[0])
    duplicates = {name: n for name, n in loaded_names.items() if n > 1}
    assert duplicates, "the corpus is known to have duplicate names"
    assert set(result.specs) == set(loaded_names)
    assert result.files_scanned == len(definition_files(root))
    dup_issues = [i for i in result.issues if i.reason.startswith("duplicate name")]
    assert len(dup_issues) == sum(n - 1 for n in duplicates.values())
    for issue in dup_issues:
        assert issue.name in duplicates and issue.severity == "warning"
        winner = result.specs[issue.name].source
        assert winner is not None and winner in issue.reason and str(issue.file) in issue.reason
        assert winner < str(issue.file)  # first in sorted path order wins
    assert not result.shadowed  # one level only: duplicates are not shadowing
