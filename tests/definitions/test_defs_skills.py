"""Skills: SKILL.md folders and flat files; metadata up front, bodies on demand; preloading."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents.definitions import (
    AgentSpec,
    DefinitionError,
    SkillIndex,
    SkillInfo,
    default_skill_dirs,
    preload_skills,
)


def skill(path: Path, name: str | None, description: str | None, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    if description is not None:
        lines.append(f"description: {description}")
    path.write_text("\n".join([*lines, "---", body, ""]))
    return path


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / ".claude" / "skills"
    skill(root / "pdf" / "SKILL.md", "pdf", "Work with PDF files.", "Use pdftotext.")
    skill(root / "style.md", None, "House style.", "Short sentences.")
    skill(root / "README.md", "readme", "not a skill", "x")
    (root / "empty-folder").mkdir()
    return root


def test_index_reads_metadata_and_bodies_on_demand(skills_dir: Path):
    index = SkillIndex([skills_dir])
    assert index.names() == ["pdf", "style"]
    assert index.info("pdf") == SkillInfo(
        "pdf", "Work with PDF files.", str(skills_dir / "pdf" / "SKILL.md")
    )
    assert index.info("nope") is None and index.issues == []
    # the body is read when asked for, and then cached
    (skills_dir / "pdf" / "SKILL.md").write_text("---\nname: pdf\ndescription: x\n---\nNew body\n")
    assert index.body("pdf") == "New body"
    (skills_dir / "pdf" / "SKILL.md").unlink()
    assert index.body("pdf") == "New body"
    assert index.render("style") == '<skill name="style">\nShort sentences.\n</skill>'
    with pytest.raises(KeyError):
        index.body("nope")


def test_body_of_a_skill_whose_file_vanished_is_a_clear_error(skills_dir: Path):
    index = SkillIndex([skills_dir])
    (skills_dir / "style.md").unlink()
    with pytest.raises(DefinitionError, match="file not found") as caught:
        index.body("style")
    assert caught.value.file == str(skills_dir / "style.md")


def test_earlier_dirs_win_and_problems_are_issues(tmp_path: Path, skills_dir: Path):
    user = tmp_path / "user-skills"
    skill(user / "pdf" / "SKILL.md", "pdf", "User pdf.", "user body")
    skill(user / "nodesc.md", None, None, "b")
    skill(user / "bad" / "SKILL.md", "bad name!", "d", "b")
    (user / "binary.md").write_bytes(b"\x00\x01")
    index = SkillIndex([skills_dir, user, tmp_path / "missing"])
    assert index.info("pdf") is not None and index.info("pdf").description == "Work with PDF files."
    assert index.names() == ["nodesc", "pdf", "style"]
    reasons = [(i.severity, Path(i.file or "").name, i.reason.split(":")[0]) for i in index.issues]
    assert reasons == [
        ("error", "SKILL.md", "skill name 'bad name!' is not allowed"),
        ("error", "binary.md", "binary file (a NUL byte at offset 0); not a text definition"),
        ("warning", "nodesc.md", "skill has no 'description'"),
        ("warning", "missing", "skills directory not found; no skills loaded from it"),
    ]


def test_preload_appends_rendered_skills_and_warns_on_unknown(skills_dir: Path):
    index = SkillIndex([skills_dir])
    spec = AgentSpec(
        name="w", description="d", prompt="You write.", skills=("style", "ghost", "pdf"),
        source="w.md",
    )  # fmt: skip
    prompt, issues = preload_skills(spec, index)
    assert prompt == (
        'You write.\n\n<skill name="style">\nShort sentences.\n</skill>\n\n'
        '<skill name="pdf">\nUse pdftotext.\n</skill>'
    )
    assert [(i.severity, i.name, i.file) for i in issues] == [("warning", "w", "w.md")]
    assert "unknown skill 'ghost' (known: pdf, style)" in issues[0].reason
    plain = AgentSpec(name="p", description="d", prompt="Only me.")
    assert preload_skills(plain, index) == ("Only me.", [])


def test_default_skill_dirs(tmp_path: Path):
    home = tmp_path / "home"
    (home / ".claude" / "skills").mkdir(parents=True)
    project = tmp_path / "proj"
    (project / ".claude" / "skills").mkdir(parents=True)
    (project / "deep" / "er").mkdir(parents=True)
    assert default_skill_dirs(cwd=project / "deep" / "er", home=home) == [
        project / ".claude" / "skills",
        home / ".claude" / "skills",
    ]
    assert default_skill_dirs(cwd=tmp_path / "proj", home=tmp_path / "nobody") == [
        project / ".claude" / "skills"
    ]


def test_large_skills_metadata_from_the_head_and_the_whole_body_on_demand(tmp_path: Path):
    root = tmp_path / "skills"
    body = "\n".join(f"Step {i}: do the thing carefully." for i in range(3000))  # ~100 KB
    skill(root / "big" / "SKILL.md", "big", "A big one.", body)
    long_description = "word " * 5000  # a header longer than the head read up front
    skill(root / "longhead.md", "longhead", long_description.strip(), "Short body.")
    index = SkillIndex([root])
    assert index.issues == []
    assert index.info("big") == SkillInfo("big", "A big one.", str(root / "big" / "SKILL.md"))
    assert index.body("big") == body
    info = index.info("longhead")
    assert info is not None and info.description == long_description.strip()
    assert index.body("longhead") == "Short body."
