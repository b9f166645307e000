"""An agents folder an outsider shaped (session 28): each bad entry is one error naming the
file, and every good definition beside it still loads.

Tried and held (no test of their own here; tests/definitions/test_defs_bad_input.py holds
most): malformed YAML, binary files, a 10 MB file, duplicate names, names with ``/``,
``..``, NUL, an RTL override or 10,000 characters, a billion-laughs header, a FIFO, a
dangling link, a link out of the folder (read: links are followed, docs/definitions.md), a
folder linking back up the tree (followed once), a folder named ``x.md``."""

from __future__ import annotations

from pathlib import Path

from subagents.definitions import DefinitionLoader, Level, Source

GOOD = "---\nname: good\ndescription: fine\n---\nPrompt.\n"


def test_a_loop_of_links_is_named_not_skipped(tmp_path: Path) -> None:
    """``a.md -> b.md -> a.md``: the walk's ``is_dir`` raised (ELOOP) and the entry was
    dropped without a word, where a dangling link is named ("file not found")."""
    root = tmp_path / "agents"
    root.mkdir()
    (root / "good.md").write_text(GOOD)
    (root / "a.md").symlink_to(root / "b.md")
    (root / "b.md").symlink_to(root / "a.md")
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    assert sorted(result.specs) == ["good"]
    named = {Path(i.file or "").name: str(i) for i in result.issues}
    assert set(named) == {"a.md", "b.md"}, named
    for text in named.values():
        assert "error" in text and "Too many levels of symbolic links" in text, text


def test_a_loop_of_links_named_like_a_folder_is_named_too(tmp_path: Path) -> None:
    """``team -> more -> team`` (no ``.md``: where a folder of definitions would be) was
    skipped without a word, as ``a.md`` was: each is an error naming it now."""
    root = tmp_path / "agents"
    root.mkdir()
    (root / "good.md").write_text(GOOD)
    (root / "team").symlink_to(root / "more")
    (root / "more").symlink_to(root / "team")
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    assert sorted(result.specs) == ["good"]
    named = {Path(i.file or "").name: str(i) for i in result.issues}
    assert set(named) == {"team", "more"}, named
    for text in named.values():
        assert "error" in text and "Too many levels of symbolic links" in text, text


def test_a_name_that_is_a_topics_address_is_refused_naming_why(tmp_path: Path) -> None:
    """``name: topic:reviews`` loaded (a warning: not kebab-case, "mail must use it exactly"),
    but the mail room reads ``topic:`` before any name: mail to the agent by name went to
    the topic's subscribers (any run of the tree subscribed to ``reviews``), never to it."""
    root = tmp_path / "agents"
    root.mkdir()
    (root / "good.md").write_text(GOOD)
    (root / "hijack.md").write_text("---\nname: topic:reviews\ndescription: d\n---\nP.\n")
    result = DefinitionLoader([Source(str(root), Level.DIRS)]).load()
    assert sorted(result.specs) == ["good"]
    [issue] = [str(i) for i in result.issues]
    assert "hijack.md:2: error" in issue and "starts with 'topic:'" in issue, issue


def test_a_reload_meeting_a_topics_address_keeps_the_other_agents(tmp_path: Path) -> None:
    """Hot reload: a file renamed to ``topic:...`` in place loses only that agent (removed,
    an error naming the file); a loop of links appearing beside it is one more error; every
    other definition stays loaded, unchanged."""
    root = tmp_path / "agents"
    root.mkdir()
    (root / "good.md").write_text(GOOD)
    (root / "other.md").write_text(GOOD.replace("good", "other"))
    loader = DefinitionLoader([Source(str(root), Level.DIRS)])
    assert sorted(loader.load().specs) == ["good", "other"]
    (root / "other.md").write_text("---\nname: topic:other\ndescription: d\n---\nPrompt, longer.\n")
    (root / "a.md").symlink_to(root / "b.md")
    (root / "b.md").symlink_to(root / "a.md")
    result, changes = loader.reload()
    assert sorted(result.specs) == ["good"]
    assert (changes.removed, changes.changed) == (("other",), ())
    named = sorted(Path(i.file or "").name for i in result.issues if i.severity == "error")
    assert named == ["a.md", "b.md", "other.md"], result.issues
    again, unchanged = loader.reload()  # the next poll: nothing new, nothing lost
    assert sorted(again.specs) == ["good"] and not unchanged
