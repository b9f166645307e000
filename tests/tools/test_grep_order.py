"""Grep's file list newest first: equal times in path order, a file gone before its stat, a
symlink, names with a newline or not in UTF-8; the order itself (``grep_order``) and through
the tool with real ripgrep on a real tree."""

from __future__ import annotations

import os
from pathlib import Path

from subagents.tools.builtin import builtin_tools
from subagents.tools.context import ToolContext
from subagents.tools.grep_order import Listing, newest_first

TOOLS = builtin_tools()


def grep(ctx: ToolContext, **arguments: object) -> list[str]:
    return TOOLS["Grep"].call({"output_mode": "files_with_matches", **arguments}, ctx).split("\n")


def listing(*paths: Path | bytes) -> bytes:
    """What ``rg --files-with-matches --null`` prints for ``paths``, in that order."""
    return b"".join((p if isinstance(p, bytes) else os.fsencode(p)) + b"\0" for p in paths)


def touch(path: Path, when: int, text: str = "needle\n") -> Path:
    path.write_text(text)
    os.utime(path, (when, when))
    return path


def test_equal_times_are_in_path_order_after_the_newer(tmp_path: Path) -> None:
    c, a, b = touch(tmp_path / "c", 500), touch(tmp_path / "a", 500), touch(tmp_path / "b", 500)
    new, old = touch(tmp_path / "new", 900), touch(tmp_path / "old", 100)
    # ripgrep's order (its threads') is any: given here backwards
    assert newest_first(listing(old, c, b, new, a)) == [str(p) for p in (new, a, b, c, old)]


def test_a_file_gone_before_its_stat_is_listed_last_not_an_error(tmp_path: Path) -> None:
    kept = touch(tmp_path / "kept", 100)
    gone_b, gone_a = tmp_path / "gone_b", tmp_path / "gone_a"  # listed, then deleted
    assert newest_first(listing(gone_b, kept, gone_a)) == [str(kept), str(gone_a), str(gone_b)]


def test_a_symlink_takes_its_targets_time(tmp_path: Path) -> None:
    target = touch(tmp_path / "target", 900)
    link = tmp_path / "link"
    link.symlink_to(target)
    os.utime(link, (100, 100), follow_symlinks=False)  # the link itself is old
    middle = touch(tmp_path / "middle", 500)
    assert newest_first(listing(middle, link)) == [str(link), str(middle)]


def test_a_name_not_in_utf8_is_ordered_by_its_real_time(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/bad\xff"
    with open(raw, "w") as f:
        f.write("needle\n")
    os.utime(raw, (900, 900))
    older = touch(tmp_path / "older", 500)
    shown = str(tmp_path) + "/bad\ufffd"  # shown with U+FFFD, stat'ed by its bytes
    assert newest_first(listing(older, raw)) == [shown, str(older)]


def test_the_tool_lists_newest_first_then_windows(context: ToolContext, repo: Path) -> None:
    tree = repo / "tree"
    tree.mkdir()
    for i, when in enumerate([300, 100, 300, 200, 300]):
        touch(tree / f"f{i}.txt", when)
    by_order = [str(tree / f"f{i}.txt") for i in (0, 2, 4, 3, 1)]
    assert grep(context, pattern="needle", path=str(tree)) == ["Found 5 files", *by_order]
    assert grep(context, pattern="needle", path=str(tree), offset=1, head_limit=2) == [
        "Found 2 files",
        *by_order[1:3],
    ]


def test_the_tool_keeps_a_name_with_a_newline_whole(context: ToolContext, repo: Path) -> None:
    tree = repo / "tree"
    tree.mkdir()
    odd = touch(tree / "two\nlines.txt", 900)
    plain = touch(tree / "plain.txt", 500)
    # one file, not two: ripgrep's list is split on NUL, not on the newline in the name
    assert grep(context, pattern="needle", path=str(tree)) == [
        "Found 2 files",
        *str(odd).split("\n"),
        str(plain),
    ]


def test_the_tool_finds_a_name_not_in_utf8_by_its_time(context: ToolContext, repo: Path) -> None:
    tree = repo / "tree"
    tree.mkdir()
    raw = os.fsencode(tree) + b"/bad\xfe.txt"
    with open(raw, "w") as f:
        f.write("needle\n")
    os.utime(raw, (900, 900))
    plain = touch(tree / "plain.txt", 500)
    assert grep(context, pattern="needle", path=str(tree)) == [
        "Found 2 files",
        f"{tree}/bad\ufffd.txt",
        str(plain),
    ]


def test_a_path_cut_between_two_reads_is_stat_ed_whole(tmp_path: Path) -> None:
    new, old = touch(tmp_path / "new", 900), touch(tmp_path / "old", 100)
    found = Listing()
    whole = listing(old, new)
    for start in range(0, len(whole), 3):  # ripgrep's writes, read mid-path
        found.feed(whole[start : start + 3])
    assert found.newest_first() == [str(new), str(old)]


def test_the_tool_stats_every_file_of_a_long_list(context: ToolContext, repo: Path) -> None:
    tree = repo / "tree"
    tree.mkdir()
    for i in range(1500):  # more than one read of ripgrep's output, over the answer's cap
        touch(tree / f"file_{i:04}.txt", 1000 + i)
    answer = grep(context, pattern="needle", path=str(tree))
    assert answer[:3] == ["Found 1500 files", str(tree / "file_1499.txt"),
                          str(tree / "file_1498.txt")]  # fmt: skip
    oldest = grep(context, pattern="needle", path=str(tree), offset=1499)
    assert oldest == ["Found 1 file", str(tree / "file_0000.txt")]
