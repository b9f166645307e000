"""Read, Write, Edit, MultiEdit, Glob, Grep and LS on a real temp git repo, answering as
Claude Code's tools do."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.tools.base import ToolError
from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext

TOOLS = builtin_tools()


def call(ctx: ToolContext, name: str, **arguments: object) -> str:
    return TOOLS[name].call(arguments, ctx)


def error(ctx: ToolContext, name: str, **arguments: object) -> str:
    with pytest.raises(ToolError) as caught:
        TOOLS[name].call(arguments, ctx)
    return str(caught.value)


# ---- Read ----------------------------------------------------------------------------------


def test_read_numbers_lines_like_cat_n(context: ToolContext, repo: Path) -> None:
    text = call(context, "Read", file_path=str(repo / "src" / "calc.py"))
    assert text.splitlines()[:2] == ["     1\tdef add(a, b):", "     2\t    return a - b"]
    assert "Showing lines" not in text  # the whole file: no note


def test_read_offset_and_limit_say_what_is_shown(context: ToolContext, repo: Path) -> None:
    big = repo / "big.txt"
    big.write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    text = call(context, "Read", file_path=str(big), offset=10, limit=3)
    assert text.splitlines()[:3] == ["    10\tline 10", "    11\tline 11", "    12\tline 12"]
    assert "(Showing lines 10-12 of 5000." in text
    default = call(context, "Read", file_path=str(big))
    assert default.splitlines()[1999] == "  2000\tline 2000"
    assert "(Showing lines 1-2000 of 5000." in default


def _bytes_read_by_this_thread() -> int:
    for line in Path("/proc/thread-self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/thread-self/io")


def test_read_of_the_head_of_a_huge_file_does_not_read_the_rest(
    context: ToolContext, repo: Path
) -> None:
    huge = repo / "huge.log"
    with open(huge, "wb") as f:
        f.write(b"".join(b"line %d\n" % i for i in range(1, 3001)))
        f.truncate(64 << 20)  # a 64 MiB file: the rest is a sparse run of zero bytes
    before = _bytes_read_by_this_thread()
    text = call(context, "Read", file_path=str(huge))
    read = _bytes_read_by_this_thread() - before
    assert text.splitlines()[1999] == "  2000\tline 2000"
    assert "(Showing lines 1-2000 of a 67,108,864-byte file; more lines follow." in text
    assert read < 1 << 20, f"Read read {read:,} bytes to show 2,000 short lines"


def test_read_cuts_long_lines_and_warns_on_empty_and_short(
    context: ToolContext, repo: Path
) -> None:
    wide = repo / "wide.txt"
    wide.write_text("x" * 5000 + "\n")
    assert call(context, "Read", file_path=str(wide)).endswith("… [line truncated]")
    empty = repo / "empty.txt"
    empty.write_text("")
    assert "the file exists but the contents are empty" in call(
        context, "Read", file_path=str(empty)
    )
    short = call(context, "Read", file_path=str(repo / "src" / "calc.py"), offset=100)
    assert "shorter than the provided offset (100). The file has 6 lines." in short


def test_read_errors_name_the_problem(context: ToolContext, repo: Path) -> None:
    assert error(context, "Read", file_path=str(repo / "nope.py")).startswith("File does not exist")
    assert "is a directory" in error(context, "Read", file_path=str(repo / "src"))
    (repo / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert "binary file" in error(context, "Read", file_path=str(repo / "blob.bin"))
    assert "invalid input for Read" in error(context, "Read", path="x")


# ---- Write / Edit / MultiEdit --------------------------------------------------------------


def test_write_creates_and_refuses_an_unread_existing_file(
    context: ToolContext, repo: Path
) -> None:
    new = repo / "pkg" / "new.py"
    assert call(context, "Write", file_path=str(new), content="x = 1\n") == (
        f"File created successfully at: {new}"
    )
    assert new.read_text() == "x = 1\n"
    target = repo / "src" / "calc.py"
    assert "File has not been read yet" in error(
        context, "Write", file_path=str(target), content=""
    )
    call(context, "Read", file_path=str(target))
    os.utime(target, (1, 1))  # someone else touched it after the read
    assert "modified since read" in error(context, "Write", file_path=str(target), content="")
    call(context, "Read", file_path=str(target))
    assert "has been updated" in call(context, "Write", file_path=str(target), content="y = 2\n")
    assert target.read_text() == "y = 2\n"


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_new_files_get_the_mode_the_umask_gives_and_old_ones_keep_theirs(
    context: ToolContext, repo: Path, umask: int
) -> None:
    old_umask = os.umask(umask)
    try:
        call(context, "Write", file_path=str(repo / "written.py"), content="x = 1\n")
        call(context, "Edit", file_path=str(repo / "edited.py"), old_string="", new_string="y\n")
        script = repo / "run.sh"
        script.write_text("echo hi\n")
        script.chmod(0o750)
        call(context, "Read", file_path=str(script))
        call(context, "Write", file_path=str(script), content="echo bye\n")
    finally:
        os.umask(old_umask)
    assert (repo / "written.py").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (repo / "edited.py").stat().st_mode & 0o777 == 0o666 & ~umask
    assert script.stat().st_mode & 0o777 == 0o750
    assert not [p.name for p in repo.iterdir() if p.name.endswith(".tmp")]


def test_edit_replaces_one_exact_match_and_shows_a_snippet(
    context: ToolContext, repo: Path
) -> None:
    target = repo / "src" / "calc.py"
    call(context, "Read", file_path=str(target))
    text = call(context, "Edit", file_path=str(target), old_string="a - b", new_string="a + b")
    assert text.startswith(f"The file {target} has been updated. Here's the result of running")
    assert "     2\t    return a + b" in text
    assert target.read_text().startswith("def add(a, b):\n    return a + b\n")


def test_edit_refuses_a_non_unique_string_and_says_how_many(
    context: ToolContext, repo: Path
) -> None:
    target = repo / "src" / "calc.py"
    call(context, "Read", file_path=str(target))
    before = target.read_text()
    message = error(
        context, "Edit", file_path=str(target), old_string="(a, b)", new_string="(x, y)"
    )
    assert message.startswith("Found 2 matches of the string to replace, but replace_all is false")
    assert target.read_text() == before
    assert "String to replace not found" in error(
        context, "Edit", file_path=str(target), old_string="zzz", new_string="y"
    )
    assert "No changes to make" in error(
        context, "Edit", file_path=str(target), old_string="a", new_string="a"
    )
    done = call(
        context, "Edit", file_path=str(target), old_string="(a, b)", new_string="(x, y)",
        replace_all=True,
    )  # fmt: skip
    assert "All occurrences of '(a, b)' were successfully replaced with '(x, y)'" in done
    assert target.read_text().count("(x, y)") == 2


def test_edit_keeps_crlf_line_endings(context: ToolContext, repo: Path) -> None:
    target = repo / "dos.txt"
    target.write_bytes(b"one\r\ntwo\r\n")
    call(context, "Read", file_path=str(target))
    call(context, "Edit", file_path=str(target), old_string="two", new_string="2")
    assert target.read_bytes() == b"one\r\n2\r\n"


def test_multiedit_is_all_or_nothing(context: ToolContext, repo: Path) -> None:
    target = repo / "src" / "calc.py"
    call(context, "Read", file_path=str(target))
    before = target.read_text()
    message = error(
        context, "MultiEdit", file_path=str(target),
        edits=[{"old_string": "a - b", "new_string": "a + b"},
               {"old_string": "missing", "new_string": "x"}],
    )  # fmt: skip
    assert message.startswith("edit 2 of 2: String to replace not found")
    assert target.read_text() == before
    done = call(
        context, "MultiEdit", file_path=str(target),
        edits=[{"old_string": "a - b", "new_string": "a + b"},
               {"old_string": "a * b", "new_string": "b * a"}],
    )  # fmt: skip
    assert done.splitlines()[0] == f"Applied 2 edits to {target}:"
    assert "return a + b" in target.read_text() and "return b * a" in target.read_text()


# ---- Glob / Grep / LS ----------------------------------------------------------------------


def test_glob_lists_matches_newest_first(context: ToolContext, repo: Path) -> None:
    os.utime(repo / "test_calc.py", (1000, 1000))
    os.utime(repo / "src" / "calc.py", (2000, 2000))
    os.utime(repo / "build" / "calc.py", (3000, 3000))
    found = call(context, "Glob", pattern="**/*.py").splitlines()
    assert found == [str(repo / "build" / "calc.py"), str(repo / "src" / "calc.py"),
                     str(repo / "test_calc.py")]  # fmt: skip
    assert call(context, "Glob", pattern="*.py", path=str(repo / "src")) == str(
        repo / "src/calc.py"
    )
    assert call(context, "Glob", pattern="**/*.{md,rst}") == "No files found"
    assert call(context, "Glob", pattern=f"{repo}/src/*.py") == str(repo / "src" / "calc.py")


def test_glob_truncates_at_100(context: ToolContext, repo: Path) -> None:
    many = repo / "many"
    many.mkdir()
    for i in range(120):
        (many / f"f{i}.txt").write_text("")
    lines = call(context, "Glob", pattern="many/*.txt").splitlines()
    assert len(lines) == 101
    assert lines[-1].startswith("(Results are truncated.")


def test_grep_modes_follow_gitignore(context: ToolContext, repo: Path) -> None:
    # build/ is gitignored: ripgrep leaves it out, as Claude Code's Grep does
    assert call(context, "Grep", pattern="def add") == f"Found 1 file\n{repo / 'src' / 'calc.py'}"
    content = call(context, "Grep", pattern="return", output_mode="content")
    assert content.splitlines() == [f"{repo / 'src' / 'calc.py'}:2:    return a - b",
                                    f"{repo / 'src' / 'calc.py'}:6:    return a * b"]  # fmt: skip
    counted = call(context, "Grep", pattern="add", output_mode="count")
    assert f"{repo / 'test_calc.py'}:3" in counted.splitlines()
    assert f"{repo / 'src' / 'calc.py'}:1" in counted.splitlines()
    assert counted.endswith("Found 4 total occurrences across 2 files.")
    context_lines = call(
        context, "Grep", pattern="def mul", output_mode="content", **{"-B": 1, "-n": False}
    )
    assert context_lines.splitlines()[-1] == f"{repo / 'src' / 'calc.py'}:def mul(a, b):"
    assert call(context, "Grep", pattern="DEF ADD", **{"-i": True}).startswith("Found 1 file")
    assert call(context, "Grep", pattern="nothing here") == "No files found"
    assert (
        call(context, "Grep", pattern="add", glob="*.py", type="py", head_limit=1).count("\n") == 1
    )
    assert "Grep failed" in error(context, "Grep", pattern="(unclosed")
    assert call(context, "Grep", pattern="-b", output_mode="content") == "No matches found"


def test_grep_count_keeps_its_summary_when_the_output_is_capped(
    context: ToolContext, repo: Path
) -> None:
    many = repo / "many"
    many.mkdir()
    for i in range(1500):  # ~1,500 lines of 'path:1', over the 30,000-character cap
        (many / f"file_with_a_longish_name_{i:04}.txt").write_text("needle\n")
    counted = call(context, "Grep", pattern="needle", output_mode="count")
    assert "[output truncated:" in counted
    assert counted.endswith("Found 1500 total occurrences across 1500 files.")


def test_grep_multiline(context: ToolContext, repo: Path) -> None:
    found = call(context, "Grep", pattern=r"add\(a, b\):\n\s+return", multiline=True)
    assert found == f"Found 1 file\n{repo / 'src' / 'calc.py'}"
    # without multiline, ripgrep refuses a newline in the pattern, and says to use it
    assert "--multiline" in error(context, "Grep", pattern=r"add\(a, b\):\n\s+return")


def test_ls_shows_a_tree_without_hidden_entries(context: ToolContext, repo: Path) -> None:
    tree = call(context, "LS", path=str(repo))
    assert tree.splitlines() == [
        f"- {repo}/", "  - build/", "    - calc.py", "  - src/", "    - calc.py",
        "  - test_calc.py",
    ]  # fmt: skip
    assert "build" not in call(context, "LS", path=str(repo), ignore=["build"])


def test_notebook_edit_replaces_inserts_and_deletes_cells(context: ToolContext, repo: Path) -> None:
    import json

    book = repo / "nb.ipynb"
    cells = [
        {"cell_type": "code", "id": "a1", "metadata": {}, "source": ["x = 1\n"],
         "execution_count": 3, "outputs": [{"output_type": "stream", "text": "old"}]},
        {"cell_type": "markdown", "id": "b2", "metadata": {}, "source": ["# Title\n"]},
    ]  # fmt: skip
    book.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    assert "not been read" in error(context, "NotebookEdit", notebook_path=str(book), new_source="")
    call(context, "Read", file_path=str(book))
    out = call(context, "NotebookEdit", notebook_path=str(book), cell_id="a1", new_source="x = 2\n")
    assert out == "Updated cell a1 with x = 2\\n"
    inserted = call(
        context, "NotebookEdit", notebook_path=str(book), cell_id="a1", new_source="y",
        cell_type="code", edit_mode="insert",
    )  # fmt: skip
    assert inserted.startswith("Inserted cell ")
    call(context, "NotebookEdit", notebook_path=str(book), cell_id="b2", new_source="",
         edit_mode="delete")  # fmt: skip
    saved = json.loads(book.read_text())["cells"]
    assert [c["source"] for c in saved] == [["x = 2\n"], ["y"]]
    assert saved[0]["outputs"] == [] and saved[0]["execution_count"] is None
    assert "not found" in error(context, "NotebookEdit", notebook_path=str(book), cell_id="zz",
                                new_source="")  # fmt: skip


def test_glob_never_lists_outside_the_workspace(
    context: ToolContext, repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.py").write_text("")
    (repo / "out").symlink_to(tmp_path)
    assert "climbs out with '..'" in error(context, "Glob", pattern="../*.py")
    assert call(context, "Glob", pattern="out/*.py") == "No files found"
    assert "outside the workspace" in error(context, "Glob", pattern=f"{tmp_path}/*.py")
