"""The complete example of docs/offline-model.md runs through the real runtime as documented."""

from __future__ import annotations

import re
from pathlib import Path

from subagents.definitions.spec import AgentSpec
from subagents.messages import RunStatus
from subagents.models import ScriptedModel
from subagents.runtime import Runtime

DOC = Path(__file__).resolve().parents[2] / "docs" / "offline-model.md"


def example_blocks() -> tuple[str, str]:
    """The example's YAML script and its documented output."""
    section = DOC.read_text().split("## A complete example", 1)[1]
    script = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    output = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert script is not None and output is not None, "the example's blocks moved"
    return script.group(1), output.group(1)


def test_documented_example_gives_documented_output(tmp_path: Path) -> None:
    script, output = example_blocks()
    path = tmp_path / "scripts.yaml"
    path.write_text(script)
    model = ScriptedModel.from_file(path)
    assert model.agents == {"lead", "researcher", "critic", "writer", "slow"}
    agents = [
        AgentSpec(name=name, description=f"the {name}")
        for name in ("lead", "researcher", "critic", "slow")
    ]
    agents.append(AgentSpec(name="writer", description="the writer", restart="transient"))
    with Runtime(agents, model=model) as rt:
        report = rt.run("lead", "actor runtimes", wait=30)
        slow = rt.run("slow", "anything", timeout=0.5, wait=30)
    assert report.status is RunStatus.COMPLETED
    assert f"{report.result}\n{slow.status}\n" == output
