"""Which recovered work a resumed LLM turn keeps (``behaviour/request_ids.this_turn``), for
every form of request id: a call's, a fan_out child's, an approval asked of the parent; made
by this version (the turn in it) or by one before (the tool_use id alone). The crash tests
(tests/durability/test_repeated_ids_crash.py) show the same through real runs."""

from __future__ import annotations

from subagents.behaviour import parent_approvals, request_ids
from subagents.behaviour.fan_out_tool import FanOutCalls
from subagents.messages import ChildDone, MailAck, Outcome, RunStatus, SpawnReply, ToolUseBlock

USES = [ToolUseBlock(id="toolu_a", name="spawn_subagent", input={})]
DONE = Outcome(run_id="r2", status=RunStatus.COMPLETED, result="ok")


def _kept(*request_ids_: str) -> tuple[list[str], set[str]]:
    recovered = [SpawnReply(request_id=r, run_id="r2") for r in request_ids_]
    kept, done = request_ids.this_turn(recovered, USES, retries=1, step=3)
    return [m.request_id for m in kept], done


def test_a_call_of_this_turn_is_kept_and_done() -> None:
    assert _kept("toolu_a@1.3") == (["toolu_a@1.3"], {"toolu_a"})


def test_a_call_of_another_turn_or_retry_under_the_same_id_is_left_out() -> None:
    assert _kept("toolu_a@1.2", "toolu_a@0.3", "toolu_b@1.3") == ([], set())


def test_fan_out_children_and_approvals_are_kept_but_not_done() -> None:
    """(Their calls run again: a fan_out skips the children it has, an approval its mail.)"""
    kept, done = _kept("toolu_a@1.3#fan0", "approve:toolu_a@1.3", "toolu_a@1.2#fan0")
    assert (kept, done) == (["toolu_a@1.3#fan0", "approve:toolu_a@1.3"], set())
    assert FanOutCalls.owns(kept[0]) and parent_approvals.use_id_of(kept[1]) == "toolu_a"


def test_an_older_stores_ids_are_taken_as_this_turns_calls() -> None:
    kept, done = _kept("toolu_a", "toolu_a#fan1", "approve:toolu_a", "toolu_b")
    assert kept == ["toolu_a@1.3", "toolu_a@1.3#fan1", "approve:toolu_a@1.3"]
    assert done == {"toolu_a"}


def test_every_kind_of_recovered_answer_keeps_its_fields() -> None:
    recovered = [
        ChildDone(request_id="toolu_a", outcome=DONE),
        MailAck(request_id="toolu_a", mail_id="m1", recipient="r3"),
    ]
    kept, _ = request_ids.this_turn(recovered, USES, retries=0, step=1)
    assert kept == (
        ChildDone(request_id="toolu_a@0.1", outcome=DONE),
        MailAck(request_id="toolu_a@0.1", mail_id="m1", recipient="r3"),
    )


def test_a_request_id_reads_back_as_its_tool_use_id() -> None:
    for use_id in ("toolu_a", "a@b", "toolu_a_2"):
        assert request_ids.use_id_of(request_ids.of_call(use_id, 2, 7)) == use_id
    assert request_ids.use_id_of("toolu_a") == "toolu_a"  # an older store's
