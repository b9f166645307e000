"""Two senders racing to one LLM run that reads its mail and answers it straight: a crash
right after an answer is committed neither loses a mail nor answers one twice.

``llm_replier_job.py`` forces, with real synchronization, mail committed in one order and
handed over in the other: "A" (``first``'s) is committed, then "B" (``second``'s), and B is
handed to ``replier`` (a scripted model) first. ``replier`` takes B as its
``wait_for_message`` result and answers it straight ("re B", its sender's own commit); the
job is SIGKILLed there, the supervisor's group lingering for minutes
(actors/group_linger.py). The second run shows the resumed ``replier`` A between turns, it
answers "re A" straight, and is SIGKILLed again; the third run ends. Every mail is kept once,
read, and answered once, and the conversation shows each mail once.

Why it holds (unlike a function agent's replay, which needed its receive's journal entry
carried by its straight mail: test_two_senders_crash.py): an LLM run's mail is sent only by a
tool call of a model turn, and a turn after which the run may go on is ASKED of the
supervisor (``AgentActor.report_step``), which commits its open group first (the read
receipt of a tool result told before it) and then the turn's checkpoint, with the ids of the
mail its message showed, before the answer comes back; only then are the turn's tool calls
run. So what the model saw is in the store before anything it decided from it is, and a
resumed run takes up that checkpoint: its answer found by the call's id (the ``request_id``
of its mail), not sent again, and the mail it read not shown again.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import msgspec
from job_kit import kill_at, start_job

from subagents.messages import ChatMessage, MailState, RunStatus, TextBlock, ToolResultBlock
from subagents.store.opening import open_location

JOB = Path(__file__).with_name("llm_replier_job.py")
LINGER_S = "600"
"""The supervisor's group lingers (actors/group_linger.py) past any kill of the test."""


def _start(db: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start_job(JOB, db, out, *extra)


def _shown(messages: tuple[ChatMessage, ...], content: str) -> list[str]:
    """Where the conversation showed a mail ``content``: ``"result"`` (a tool result) or
    ``"message"`` (a user message's text), once per time shown."""
    tag = f">{content}</mail>"
    where: list[str] = []
    for message in messages:
        if message.role != "user":
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock) and tag in block.content:
                where.append("result")
            elif isinstance(block, TextBlock) and tag in block.text:
                where.append("message")
    return where


def _replier(db: Path) -> tuple[list[str], dict[str, MailState], list[str], list[str]]:
    """What the store holds of ``replier``: its mail in commit order (but its end, mailed to
    the root), each one's state, and where its last checkpoint showed "B" and "A"."""
    store = open_location(db)
    try:
        runs = {r.agent: r.run_id for r in store.list_runs()}
        replier, root = runs["replier"], runs["root"]
        mail = [m for m in store.mail_for(replier) if root not in (m.sender, m.recipient)]
        checkpoint = store.load_checkpoint(replier)
        messages = checkpoint.messages if checkpoint is not None else ()
        return (
            [m.content for m in mail],
            {m.content: m.state for m in mail},
            _shown(messages, "B"),
            _shown(messages, "A"),
        )
    finally:
        store.close()


def test_an_llm_run_that_reads_mail_and_answers_straight_answers_each_mail_once(
    tmp_path: Path,
) -> None:
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    # 1. killed once "re B" is committed: A was committed first, B handed over first
    kill_at(_start(db, out, LINGER_S), b"replied\n")
    sent, state, b_shown, a_shown = _replier(db)
    assert sent == ["A", "B", "re B"], sent
    # the turn that saw B (in its wait's result) is in the store, B read with it: the
    # answer came after them
    assert (b_shown, a_shown) == (["result"], []), (b_shown, a_shown)
    assert (state["A"], state["B"]) == (MailState.DELIVERED, MailState.READ), state

    # 2. resumed: A shown between turns and answered; killed once "re A" is committed
    kill_at(_start(db, out, LINGER_S, "wait-first"), b"replied\n")
    sent, state, b_shown, a_shown = _replier(db)
    assert sent == ["A", "B", "re B", "re A"], sent
    assert (b_shown, a_shown) == (["result"], ["message"]), (b_shown, a_shown)
    assert (state["A"], state["B"]) == (MailState.READ, MailState.READ), state

    # 3. resumed again: nothing is answered again, and the run ends
    proc = _start(db, out)
    stdout, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert b"replied" not in stdout  # no answer sent a second time
    assert msgspec.json.decode(out.read_bytes()) == {
        "status": "completed",
        "result": "re A|re B",
    }
    sent, state, b_shown, a_shown = _replier(db)
    assert (b_shown, a_shown) == (["result"], ["message"]), (b_shown, a_shown)
    store = open_location(db)
    try:
        runs = {r.agent: r for r in store.list_runs()}
        replier = runs["replier"]
        assert replier.outcome is not None
        assert (replier.status, replier.outcome.result) == (RunStatus.COMPLETED, "answered")
        root = runs["root"].run_id  # (the replier's end is mailed to it: not counted)
        mail = [m for m in store.mail_for(replier.run_id) if root not in (m.sender, m.recipient)]
        assert Counter(m.content for m in mail) == Counter(["A", "B", "re B", "re A"])
        assert {m.state for m in mail} == {MailState.READ}
        to = {m.content: m.recipient for m in mail}
        assert to["re A"] == runs["first"].run_id and to["re B"] == runs["second"].run_id
        assert {r.status for r in runs.values()} == {RunStatus.COMPLETED}
    finally:
        store.close()


STALLED_JOB = Path(__file__).with_name("llm_stalled_job.py")


def test_a_turn_the_supervisor_did_not_answer_in_time_is_kept_before_its_mail(
    tmp_path: Path,
) -> None:
    """The one way around the asked step: its answer timed out (``agent.ASK_TIMEOUT_S``, a
    supervisor stalled that long), and the run goes on. ``llm_stalled_job.py`` stalls the
    supervisor before ``talker``'s step, which decides "hello", is recorded; the job is
    SIGKILLed once the turn's mail has gone. The store must not keep "hello" without that
    turn: the run after the kill takes the turn again, and the model (new tool-use ids each
    call, as a real model's) would say hello again. (Before the fix "hello" went straight,
    its sender's own commit, and the resumed run mailed it a second time.)"""
    db, out = tmp_path / "runs.db", tmp_path / "out.json"
    kill_at(start_job(STALLED_JOB, db, out), b"said\n")
    store = open_location(db)
    try:
        talker = next(r.run_id for r in store.list_runs() if r.agent == "talker")
        hellos = [m for m in store.mail_for(talker) if m.content == "hello"]
        checkpoint = store.load_checkpoint(talker)
        turns = checkpoint.step if checkpoint is not None else 0
        assert not hellos or turns >= 1, (hellos, turns)  # a mail only after its turn
    finally:
        store.close()
    proc = start_job(STALLED_JOB, db, out)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert msgspec.json.decode(out.read_bytes()) == {"status": "completed", "result": "hello"}
    store = open_location(db)
    try:
        runs = {r.agent: r for r in store.list_runs()}
        hellos = [m for m in store.mail_for(runs["talker"].run_id) if m.content == "hello"]
        assert len(hellos) == 1, hellos  # said once, whatever the crash
        assert {r.status for r in runs.values()} == {RunStatus.COMPLETED}
    finally:
        store.close()
