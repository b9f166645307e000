"""Half a job for test_repeated_ids_crash's approvals: a child whose calls are asked of its
parent (``ask_parent``), its model giving a later turn's call the id of an earlier turn's;
the process dies (``os._exit``, from a tool) in that later turn, before its call is asked.

Usage: repeated_ids_asks_job.py DB WORKDIR. The lead starts the child in the background and
answers "allow" to each request it reads. The child's first turn calls ``note`` ("one",
asked and allowed); its second calls ``crash`` (a user tool: not asked), then ``note``
("two") under the first turn's id. A resumed child must ask its parent about "two".
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from repeated_ids_job import GivenIds, crash_tool

from subagents import AgentSpec, Runtime, SQLiteStore
from subagents.tools.base import Tool
from subagents.tools.permissions import Permissions

SPECS = [
    AgentSpec(name="lead", description="d", prompt="p"),
    AgentSpec(name="child", description="d", prompt="p", permission_mode="default"),
]
# the lead may do anything (so it may allow the child's calls); ``note`` is asked
PERMISSIONS = Permissions(mode="bypassPermissions", ask=("note",))
IDS = {0: ("toolu_n",), 1: ("toolu_c", "toolu_n")}
WAIT = {"name": "wait_for_message", "input": {"timeout": 30}}
ALLOW = {
    "name": "send_message",
    "input": {"to": "{mail_from}", "content": "allow", "reply_to": "{mail_id}"},
}


def model() -> GivenIds:
    spawn = {
        "name": "spawn_subagent",
        "input": {"agent": "child", "task": "note", "background": True},
    }
    script: dict[str, list[Any]] = {
        "lead": [
            {"tool_calls": [spawn, WAIT]},
            {"tool_calls": [ALLOW, WAIT]},  # the crash comes during this wait
            {"tool_calls": [ALLOW, WAIT]},
            {"text": "lead: {result1}"},
        ],
        "child": [
            {"tool_calls": [{"name": "note", "input": {"text": "one"}}]},
            {
                "tool_calls": [
                    {"name": "crash", "input": {}},
                    {"name": "note", "input": {"text": "two"}},
                ]
            },
            {"text": "child: {result1}"},
        ],
    }
    return GivenIds(script, IDS, agent="child")


def note_tool(work: Path) -> Tool:
    def note(text: str) -> str:
        """Appends the text to notes.txt."""
        with open(work / "notes.txt", "a") as notes:
            notes.write(text + "\n")
        return f"noted {text}"

    return Tool.from_function(note)


def runtime(db: str, work: Path, first_start: bool) -> Runtime:
    return Runtime(
        SPECS,
        model=model(),  # type: ignore[arg-type]
        store=SQLiteStore(db),
        tools=[crash_tool(first_start), note_tool(work)],
        workspace=work,
        permissions=PERMISSIONS,
        ask_parent=True,
        approval_wait_s=20,
        command_poll_s=0,
    )


def main(db: str, workdir: str) -> None:
    rt = runtime(db, Path(workdir), first_start=True)
    rt.spawn("lead", "go").result(timeout=60)
    raise SystemExit("the crash tool did not stop the process")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
