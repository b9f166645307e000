"""Bad input of every kind: one clear issue each, everything else loads, nothing hangs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from subagents.definitions import (
    DefinitionError,
    DefinitionLoader,
    Level,
    Source,
    load_file,
    parse_markdown,
)
from subagents.definitions.parse import MAX_FILE_BYTES

GOOD = "---\nname: {name}\ndescription: fine\n---\nPrompt.\n"

BILLION_LAUGHS = """---
name: lol
description: d
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
---
Body
"""


def deep(levels: int) -> str:
    return f"---\nname: deep\ndescription: d\nx: {'[' * levels}{']' * levels}\n---\nB\n"


def block_deep(levels: int) -> str:
    lines = [f"{'  ' * i}k{i}:" for i in range(levels)]
    return (
        "---\nname: deep\ndescription: d\nx:\n" + "\n".join("  " + ln for ln in lines) + " 1\n---\n"
    )


@pytest.mark.parametrize(
    ("text", "fragment", "line"),
    [
        (BILLION_LAUGHS, "anchor '&a' refused", 4),
        ("---\nname: a\ndescription: d\nx: *nothing\n---\n", "alias '*nothing' refused", 4),
        (deep(21), "nesting deeper than 20 levels", 4),
        (deep(200_000), "nesting deeper than 20 levels", 4),
        (block_deep(40), "nesting deeper than 20 levels", None),
        ("---\nname: a\ndescription: d\nx: [" + "1," * 30_000 + "1]\n---\n", "YAML nodes", 4),
    ],
)
def test_yaml_built_to_explode_is_refused(text: str, fragment: str, line: int | None):
    # how quickly: benchmarks/refusals.py (no wall-clock assertions in the suite)
    with pytest.raises(DefinitionError) as caught:
        parse_markdown(text, source="bomb.md")
    assert fragment in caught.value.reason and caught.value.file == "bomb.md"
    if line is not None:
        assert caught.value.line == line
    else:
        assert caught.value.line is not None


def test_a_bomb_is_not_rescued_by_the_lenient_reader():
    # invalid YAML elsewhere sends the header to the lenient reader, which must refuse too
    text = BILLION_LAUGHS.replace("description: d", "description: a: b")
    with pytest.raises(DefinitionError, match="refused"):
        parse_markdown(text)


def test_every_kind_of_bad_file_is_one_clear_issue_and_the_rest_loads(tmp_path: Path):
    root = tmp_path / "agents"
    root.mkdir()
    for index in range(3):
        (root / f"good{index}.md").write_text(GOOD.format(name=f"good{index}"))
    bad: dict[str, tuple[str, int | None]] = {}

    def add(name: str, content: bytes, fragment: str, line: int | None) -> None:
        (root / name).write_bytes(content)
        bad[name] = (fragment, line)

    add("binary.md", b"---\nname: b\n\x00\x01\x02", "binary file (a NUL byte at offset 12)", 3)
    add(
        "latin1.md",
        "---\nname: caf\u00e9\ndescription: d\n---\n".encode("latin-1"),
        "not UTF-8: byte 0xe9 at column 10",
        2,
    )
    add("nofm.md", b"# Notes\nJust a document.\n", "no frontmatter", 1)
    add("unclosed.md", b"---\nname: u\ndescription: d\n\nBody\n", "never closed", 1)
    add("slash.md", b"---\nname: ../../etc/x\ndescription: d\n---\nB\n", "a '..' path component", 2)
    add(
        "ctrl.md",
        b'---\nname: "a\\tb"\ndescription: d\n---\nB\n',
        "control or invisible character U+0009",
        2,
    )
    add("bomb.md", BILLION_LAUGHS.encode(), "anchors and aliases are not allowed", 4)
    add("noname.md", b"---\ndescription: d\n---\nB\n", "missing required field 'name'", 2)
    add("empty.md", b"", "file is empty", 1)
    # over 1 MiB: a sparse file of 4 GiB is refused from its size, without being read
    with (root / "huge.md").open("wb") as handle:
        handle.truncate(4 * 1024**3)
    bad["huge.md"] = ("over the 1 MiB limit", None)
    # not a regular file: a FIFO would block a naive reader forever
    os.mkfifo(root / "fifo.md")
    bad["fifo.md"] = ("not a regular file", None)
    # a dangling symlink
    (root / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    bad["dangling.md"] = ("file not found", None)

    result = DefinitionLoader(  # a FIFO read naively would block here for ever
        [Source(str(root), Level.DIRS), Source(str(tmp_path / "absent"), Level.DIRS)]
    ).load()
    assert sorted(result.specs) == ["good0", "good1", "good2"]
    assert result.files_scanned == 3 + len(bad) and result.files_loaded == 3
    by_file: dict[str, list[str]] = {}
    for issue in result.issues:
        by_file.setdefault(Path(issue.file or "").name, []).append(str(issue))
    assert set(by_file) == {*bad, "absent"}
    for name, (fragment, line) in bad.items():
        [text] = by_file[name]  # exactly one issue per bad file
        where = f"{root / name}:{line}: " if line is not None else f"{root / name}: "
        assert text.startswith(where) and fragment in text, text
        assert "error" in text


def test_size_limit_boundary(tmp_path: Path):
    path = tmp_path / "big.md"
    header = GOOD.format(name="big").encode()
    path.write_bytes(header + b"x" * (MAX_FILE_BYTES - len(header)))
    specs, issues = load_file(path)
    assert [s.name for s in specs] == ["big"] and issues == []
    path.write_bytes(header + b"x" * (MAX_FILE_BYTES - len(header) + 1))
    specs, issues = load_file(path)
    assert specs == [] and "1048577 bytes, over the 1 MiB limit" in issues[0].reason


def test_load_file_of_a_missing_path_does_not_raise(tmp_path: Path):
    specs, issues = load_file(tmp_path / "nope.md")
    assert specs == [] and [i.reason for i in issues] == ["file not found"]
