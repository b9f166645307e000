"""Live progress on the session's 2-node cluster: a model streaming on the worker node reaches
the driver's subscribers as ``text_delta`` events and the cluster's store as its preview; a
function agent on the head node asks where it is (``ctx.status``, over its node's link), and
the driver too (``Runtime.status``); an ask about a run of another tree is refused with its
reason, across the link as in one process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gates import Gate
from raycluster import HEAD, WORKER, LocalCluster
from subagents.behaviour.function import AgentContext, FunctionAgent
from subagents.definitions.spec import AgentSpec
from subagents.messages import Event, EventKind, RunStatus
from subagents.models.scripted import ScriptedModel
from subagents.runtime import Runtime

pytestmark = pytest.mark.ray

WAIT_S = 120.0


@pytest.fixture
def store(ray_cluster: LocalCluster, tmp_path: Path) -> Iterator[Any]:
    import ray

    from subagents.cluster.head import head_actor
    from subagents.cluster.remote_store import ClusterStore

    name = f"test-progress-{tmp_path.name}"[:60]
    actor = head_actor(name=name, path=str(tmp_path / "runs.sqlite3"))
    client = ClusterStore(actor, name=name)
    yield client
    client.close()
    ray.kill(actor)


def test_a_model_streaming_on_a_node_is_seen_and_asked_about_from_another(
    ray_cluster: LocalCluster, store: Any
) -> None:
    writing = Gate()  # set by the test once the writer's first piece is out

    async def asker(ctx: AgentContext) -> dict[str, Any]:
        child: str = await ctx.spawn("writer", "write", background=True)
        writing.wait(WAIT_S)
        seen = ctx.status(child)
        try:
            ctx.status("r-of-another-tree")
            refused = ""
        except ValueError as exc:
            refused = str(exc)
        return {"writing": seen.writing, "agent": seen.agent, "refused": refused}

    writer = AgentSpec(name="writer", description="Writes slowly.", prompt="You write.",
                       metadata={"resources": {WORKER: 1}})  # fmt: skip
    model = ScriptedModel({"writer": [{"text": "first half|second half", "stream": 2,
                                       "delay": WAIT_S}]})  # fmt: skip
    agents = [FunctionAgent.create("asker", asker, metadata={"resources": {HEAD: 1}}), writer]
    deltas: list[Event] = []
    first = threading.Event()

    def on_event(event: Event) -> None:
        if event.kind is EventKind.TEXT_DELTA:
            deltas.append(event)
            first.set()

    with Runtime(agents, model=model, store=store, cluster=ray_cluster.address,
                 restore=False) as rt:  # fmt: skip
        rt.subscribe(on_event)
        handle = rt.spawn("asker", "go")
        assert first.wait(WAIT_S), "no text_delta from the worker node"
        (writer_run,) = [r.run_id for r in rt.runs() if r.agent == "writer"]
        assert rt.status(writer_run).writing == "first half|"
        assert store.previews([writer_run])[writer_run].text == "first half|"
        writing.set()
        outcome = handle.result(timeout=WAIT_S)  # the writer is cancelled with its parent
    assert outcome.status is RunStatus.COMPLETED, outcome
    assert outcome.value == {
        "writing": "first half|",
        "agent": "writer",
        "refused": "no such run in this tree: a run can only ask about runs of its own tree",
    }
    assert deltas[0].data["parts"] == [{"kind": "text", "text": "first half|"}]
