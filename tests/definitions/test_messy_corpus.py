"""The synthetic messy corpus (tests/corpus/messy) loads as its files are written.

It is kept in the repository so that a bare clone tests every shape the public corpus has:
unquoted colons, names with spaces and slashes, tools as comma lists (repeated, trailing comma),
block lists, flow lists and ``[]``, CRLF line ends, a UTF-8 BOM (alone and with CRLF), tabs
after the colons, folded and literal descriptions, frontmatter indented after a blank line or
closed by a long dashed line, duplicate names, a file with no description, a README.
"""

from __future__ import annotations

from pathlib import Path

from corpora import SYNTHETIC, check_as_written, definition_files
from subagents.definitions import DefinitionLoader, Level, Source, load_file


def load(relative: str) -> tuple[list, list]:  # type: ignore[type-arg]
    return load_file(SYNTHETIC / relative, root=SYNTHETIC)


def test_the_bytes_are_as_messy_as_meant() -> None:
    """Guards the data itself (a checkout that normalised line ends would test nothing)."""
    assert b"\r\n" in (SYNTHETIC / "encodings/crlf.md").read_bytes()
    assert (SYNTHETIC / "encodings/bom.md").read_bytes().startswith(b"\xef\xbb\xbf---\n")
    assert (SYNTHETIC / "encodings/bom-crlf.md").read_bytes().startswith(b"\xef\xbb\xbf---\r\n")
    assert b"name:\ttabbed-agent" in (SYNTHETIC / "encodings/tabs.md").read_bytes()


def test_every_synthetic_definition_loads_as_written() -> None:
    counts, failures = check_as_written(SYNTHETIC)
    assert not failures, "\n".join(failures)
    assert counts["loaded"] == len(definition_files(SYNTHETIC)) - 1  # all but the broken one
    assert counts["unreadable"] == 1
    assert counts["readme skipped"] == 1
    assert counts["loaded: name not kebab-case"] == 2


def test_line_ends_bom_and_tabs_leave_no_trace_in_what_loads() -> None:
    [crlf], issues = load("encodings/crlf.md")
    assert not issues
    assert (crlf.name, crlf.tools, crlf.model) == ("crlf-agent", ("Read", "Edit"), "sonnet")
    assert crlf.prompt == "You were saved with CRLF.\nSecond line."
    for relative, name in (
        ("encodings/bom.md", "bom-agent"),
        ("encodings/bom-crlf.md", "bom-crlf-agent"),
    ):
        [spec], issues = load(relative)
        assert spec.name == name and not issues
        assert "\r" not in spec.description + spec.prompt
    [tabbed], issues = load("encodings/tabs.md")
    assert (tabbed.name, tabbed.tools) == ("tabbed-agent", ("Read", "Grep"))
    assert tabbed.description == "Tabs after the colons, and in the body."
    assert tabbed.prompt == "You\tuse\ttabs."


def test_odd_tool_lists_read_as_their_authors_meant() -> None:
    want = {
        "odd/tools-block-list.md": ("Read", "Write", "Bash"),
        "odd/tools-empty.md": (),
        "odd/tools-repeated.md": ("Read", "Grep"),
        "odd/tools-flow-list.md": ("Read", "Grep"),
        "plain/code-reviewer.md": ("Read", "Grep", "Glob"),
        "layout/folded-description.md": None,
    }
    for relative, tools in want.items():
        [spec], _ = load(relative)
        assert spec.tools == tools, relative


def test_files_strict_yaml_rejects_load_with_a_warning_on_the_line() -> None:
    messy = {
        "plain/unquoted-colon.md": ("rails-backend", "not strict YAML", 3),
        "layout/dashed-closer.md": ("dashed", "dashes", 4),
        "layout/indented-frontmatter.md": ("indented", "indented", 2),
    }
    for relative, (name, remark, line) in messy.items():
        specs, issues = load(relative)
        assert [s.name for s in specs] == [name], issues
        assert any(remark in i.reason and i.line == line for i in issues), issues
        assert all(i.severity == "warning" for i in issues), issues
    [rails], _ = load("plain/unquoted-colon.md")
    assert "Examples: <example>Context: Rails app needs an endpoint." in rails.description
    assert rails.model == "claude-sonnet-4-20250514"


def test_names_with_spaces_and_a_slash_load_exactly_as_written() -> None:
    want = {
        "plain/name-with-spaces.md": ("Python Testing Expert", "python-testing-expert"),
        "plain/name-with-slash.md": ("Python DevOps/CI-CD Expert", "python-devops-ci-cd-expert"),
    }
    for relative, (name, hint) in want.items():
        specs, issues = load(relative)
        assert [s.name for s in specs] == [name], issues
        [warning] = [i for i in issues if i.reason.startswith("name ")]
        assert warning.severity == "warning" and warning.name == name
        assert "spawn and mail must use it exactly" in warning.reason
        assert f"such as {hint!r}" in warning.reason
    result = DefinitionLoader([Source(str(SYNTHETIC / "plain"), Level.DIRS)]).load()
    assert {"Python DevOps/CI-CD Expert", "Python Testing Expert"} <= set(result.specs)


def test_a_file_without_a_description_is_one_error_naming_its_line() -> None:
    specs, issues = load("broken/no-description.md")
    assert specs == []
    [issue] = issues
    assert issue.severity == "error" and issue.line == 2
    assert "description" in issue.reason
    assert issue.file == str(SYNTHETIC / "broken/no-description.md")


def test_the_loader_reports_a_duplicate_by_both_files_and_keeps_the_first() -> None:
    result = DefinitionLoader([Source(str(SYNTHETIC), Level.DIRS)]).load()
    assert result.files_scanned == len(definition_files(SYNTHETIC))
    [duplicate] = [i for i in result.issues if i.reason.startswith("duplicate name")]
    first = str(SYNTHETIC / "dupes/first/helper.md")
    second = str(SYNTHETIC / "dupes/second/helper.md")
    assert duplicate.name == "helper" and duplicate.severity == "warning"
    assert first in duplicate.reason and second in duplicate.reason
    assert result.specs["helper"].source == first
    assert "lonely" not in result.specs  # the broken file loads nothing
    assert Path(first).name == Path(second).name
