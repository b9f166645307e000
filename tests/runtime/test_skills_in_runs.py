"""Skills reach agents: preloaded into the system prompt, and loaded by the load_skill tool."""

from __future__ import annotations

from pathlib import Path

from subagents import AgentSpec, Runtime, ScriptedModel
from subagents.messages import ToolResultBlock


def _skills(tmp_path: Path) -> Path:
    folder = tmp_path / "skills" / "tidy"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: tidy\ndescription: Keep things tidy.\n---\nAlways put things back.\n"
    )
    return tmp_path / "skills"


def test_definition_skills_are_preloaded_and_load_skill_reads_a_body(tmp_path: Path) -> None:
    model = ScriptedModel(
        {
            "a": [
                {
                    "tool_calls": [
                        {"name": "load_skill", "input": {"name": "tidy"}},
                        {"name": "load_skill", "input": {"name": "nope"}},
                    ]
                },
                {"text": "{results}"},
            ]
        }
    )
    agent = AgentSpec(name="a", description="d", prompt="You are A.", skills=("tidy",))
    with Runtime([agent], model=model, skills=[_skills(tmp_path)]) as rt:
        outcome = rt.run("a", "t", wait=60)
    first = model.requests[0]
    assert first.system.startswith("You are A.")
    assert '<skill name="tidy">\nAlways put things back.\n</skill>' in first.system
    assert "load_skill" in {t.name for t in first.tools}
    results = [b for b in model.requests[1].messages[-1].content if isinstance(b, ToolResultBlock)]
    assert results[0].content.startswith('<skill name="tidy">') and not results[0].is_error
    assert results[1].is_error and "unknown skill 'nope'" in results[1].content
    assert outcome.ok


def test_load_skill_is_not_offered_without_skills() -> None:
    model = ScriptedModel({"a": [{"text": "ok"}]})
    with Runtime([AgentSpec(name="a", description="d")], model=model) as rt:
        rt.run("a", "t", wait=60)
    assert "load_skill" not in {t.name for t in model.requests[0].tools}
