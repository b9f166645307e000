"""Seed gaps (issue 13 item 8): cleanup chosen per definition, per spawn and per root run and
honoured by the sweeper; JSON systemPrompt; extends by path; lists replaced or added to."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagents import Runtime, ScriptedModel
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions import load_file
from subagents.runtime import AdmissionError
from subagents.store.sqlite import SQLiteStore

from .conftest import WAIT

pytestmark = pytest.mark.usefixtures("no_new_threads")


def leaf(ctx: AgentContext) -> str:
    return "leaf"


async def parent(ctx: AgentContext) -> list[str]:
    a = await ctx.spawn("leaf", "inherits")
    b = await ctx.spawn("leaf", "asks to keep", cleanup="keep")
    c = await ctx.spawn("keeper", "its definition says keep")
    return [str(o.run_id) for o in (a, b, c)]


def test_cleanup_per_definition_spawn_and_root_and_the_sweeper_honours_it(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    agents = [
        parent,
        leaf,
        FunctionAgent.create("keeper", leaf, cleanup="keep"),
        FunctionAgent.create("tidy", leaf, cleanup="delete"),
    ]
    with Runtime(agents, store=store, archive_after_minutes=0) as rt:
        root = rt.run("parent", "go", wait=WAIT, cleanup="delete")
        inherits, kept, keeper = root.value
        tidy = rt.run("tidy", "by its definition", wait=WAIT)
        plain = rt.run("leaf", "nobody says", wait=WAIT)
        cleanup = {r.run_id: r.cleanup for r in rt.runs()}
        assert cleanup == {
            root.run_id: "delete",
            inherits: "delete",  # a child follows its tree
            kept: "keep",  # unless its spawn says otherwise
            keeper: "keep",  # or its definition does
            tidy.run_id: "delete",
            plain.run_id: "keep",
        }
        report = rt.sweep()
        assert set(report.cleaned) == {root.run_id, inherits, tidy.run_id}
        assert store.events(inherits) == [] and store.events(kept) != []
    store.close()


def test_a_bad_cleanup_is_refused_by_name() -> None:
    refused = "cleanup must be 'keep' or 'delete', got 'purge'"
    with Runtime([leaf]) as rt, pytest.raises(AdmissionError, match=refused):
        rt.run("leaf", "x", cleanup="purge")  # type: ignore[arg-type]


def test_json_system_prompt_extends_by_path_and_list_additions(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "coder.md").write_text(
        "---\nname: coder\ndescription: Codes.\ntools: Read, Edit, Bash\nskills: [pdf]\n---\n"
        "You write code.\n"
    )
    (tmp_path / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: Reviews.\nextends: core/coder\ntools: Read\n---\n"
    )
    (tmp_path / "builder.md").write_text(
        "---\nname: builder\ndescription: Builds.\nextends: core/coder.md\n+tools: Write\n"
        "+skills: xlsx\n---\nYou build.\n"
    )
    seed = tmp_path.parent / "seed.json"  # JSON definitions are read by load_file
    seed.write_text(
        '{"name": "seeded", "description": "From JSON.", "systemPrompt": "You are seeded."}'
    )
    seeded, issues = load_file(seed)
    assert issues == []
    with Runtime(seeded, agent_dirs=[tmp_path], model=ScriptedModel()) as rt:
        specs = {s.name: s for s in rt.agents()}
    assert specs["seeded"].prompt == "You are seeded."
    reviewer, builder = specs["reviewer"], specs["builder"]
    assert reviewer.tools == ("Read",)  # narrowed: a child's list replaces its parent's
    assert reviewer.prompt == "You write code." and reviewer.skills == ("pdf",)
    assert builder.tools == ("Read", "Edit", "Bash", "Write")  # +tools adds
    assert builder.skills == ("pdf", "xlsx") and builder.prompt == "You build."
