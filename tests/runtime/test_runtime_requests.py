"""The runtime tools' arguments read into requests, and the replies read into results: the
pure half of the LLM loop's tool calls (behaviour/runtime_tool_args.py)."""

from __future__ import annotations

import math

import msgspec
import pytest

from subagents.behaviour.runtime_tool_args import (
    reply_answer,
    send_request,
    spawn_request,
    wait_timeout,
)
from subagents.behaviour.tools import ToolError
from subagents.messages import ChildDone, MailAck, Outcome, RunStatus, StopReply


def test_a_spawn_call_becomes_the_childs_request() -> None:
    request = spawn_request(
        "tu1", {"agent": "explore", "task": "look", "background": True, "timeout": 5}, "r1"
    )
    assert (request.request_id, request.agent, request.task) == ("tu1", "explore", "look")
    assert request.parent_run_id == "r1"
    assert request.background is True
    assert request.timeout == 5.0


@pytest.mark.parametrize(
    "args, named",
    [
        ({"task": "look"}, "'agent'"),
        ({"agent": "explore", "task": "  "}, "'task'"),
        ({"agent": "explore", "task": "t", "timeout": True}, "'timeout'"),
        ({"agent": "explore", "task": "t", "label": 3}, "'label'"),
    ],
)
def test_bad_spawn_arguments_name_the_argument(args: dict[str, object], named: str) -> None:
    with pytest.raises(ToolError, match=named):
        spawn_request("tu1", dict(args), "r1")


def test_send_and_wait_arguments_are_checked() -> None:
    mail = send_request("tu2", {"to": "r2", "content": "hi", "reply_to": "m1"}, "r1")
    assert (mail.sender, mail.to, mail.content, mail.reply_to) == ("r1", "r2", "hi", "m1")
    with pytest.raises(ToolError, match="'content'"):
        send_request("tu2", {"to": "r2"}, "r1")
    assert wait_timeout({}) == 30.0
    assert wait_timeout({"timeout": 0}) == 0.0
    with pytest.raises(ToolError, match=">= 0 seconds"):
        wait_timeout({"timeout": -1})
    with pytest.raises(ToolError, match=">= 0 seconds, got nan"):
        wait_timeout({"timeout": math.nan})  # (a YAML script's ``.nan``)


def test_replies_become_results() -> None:
    done = ChildDone(
        request_id="tu1",
        outcome=Outcome(run_id="r2", status=RunStatus.FAILED, result=None, error="boom"),
    )
    content, is_error = reply_answer(done)
    assert is_error
    body = msgspec.json.decode(content)
    assert (body["run_id"], body["status"], body["error"]) == ("r2", "failed", "boom")
    assert reply_answer(MailAck(request_id="tu2", mail_id="m1", recipient="r3")) == (
        '{"mail_id":"m1","to":"r3"}',
        False,
    )
    assert reply_answer(MailAck(request_id="tu2", error="no such run")) == ("no such run", True)
    assert reply_answer(StopReply(request_id="tu3", stopped=("r4", "r5"))) == (
        '{"stopped":["r4","r5"]}',
        False,
    )
