"""Run references, short ids, the last listing and the transcript, in-process against a real
SQLite store in a tmp dir."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

from subagents.cli.live import LiveTree
from subagents.cli.state import (
    CliError,
    given_store,
    last_listing,
    listing_path,
    remember_listing,
    resolve,
    short_ids,
    short_prefixes,
)
from subagents.cli.transcript import transcript
from subagents.cli.views import age, build_tree
from subagents.messages import (
    ChatMessage,
    Checkpoint,
    Event,
    EventKind,
    Mail,
    MailState,
    Outcome,
    RunRecord,
    RunStatus,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from subagents.store.sqlite import SQLiteStore

IDS = ("r1a2014aaaa0000000001", "r1a2014aaaa0000000002", "r1a2014bbbb1234567890")


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "runs.sqlite3")
    for n, run_id in enumerate(IDS):
        s.save_run(
            RunRecord(
                run_id=run_id,
                agent=f"agent{n}",
                task="t",
                root_run_id=IDS[0],
                parent_run_id=None if n == 0 else IDS[0],
                depth=0 if n == 0 else 1,
                created_at=1000.0 + n,
                usage=Usage(input_tokens=10 * (n + 1), output_tokens=1),
            )
        )
    return s


def test_full_ids_prefixes_and_suffixes(store: SQLiteStore) -> None:
    assert resolve(store, IDS[2]).agent == "agent2"
    assert resolve(store, "r1a2014b").run_id == IDS[2]
    assert resolve(store, "0000000002").run_id == IDS[1]  # a suffix, as the live tree shows
    with pytest.raises(CliError, match=r"ambiguous: it matches .*0001, .*0002"):
        resolve(store, "r1a2014aaaa")
    with pytest.raises(CliError, match="no run matches 'xyz'"):
        resolve(store, "xyz")
    with pytest.raises(CliError, match="no run matches '00002'"):
        resolve(store, "00002")  # suffixes need six characters or more
    with pytest.raises(CliError, match="empty run reference"):
        resolve(store, "  ")


def test_row_numbers(store: SQLiteStore) -> None:
    with pytest.raises(CliError, match="run `subagents ps` first"):
        resolve(store, "#1")
    remember_listing(store, [IDS[2], IDS[0]])
    assert last_listing(store) == (IDS[2], IDS[0])
    assert resolve(store, "#1").run_id == IDS[2]
    assert resolve(store, "#2").run_id == IDS[0]
    with pytest.raises(CliError, match="listed 2 run"):
        resolve(store, "#3")
    other = SQLiteStore(store.path.with_name("other.sqlite3"))
    remember_listing(other, [IDS[1]])  # the same folder: the listing is of the other store now
    with pytest.raises(CliError, match="no listing to pick from"):
        resolve(store, "#1")
    with pytest.raises(CliError, match=f"run {IDS[1]} is no longer in the store"):
        resolve(other, "#1")  # listed there, but that store has no such run
    other.close()
    listing_path(store).write_text("{not json", encoding="utf-8")
    with pytest.raises(CliError, match="cannot read the last listing"):
        resolve(store, "#1")


def test_short_ids_are_the_shortest_unique_suffixes() -> None:
    ids = (*IDS, "r1a2014cccc1234567890")  # shares its last 10 characters with IDS[2]
    shorts = short_ids(ids, ids)
    assert shorts[IDS[0]] == "00000001" and shorts[IDS[1]] == "00000002"
    assert shorts[IDS[2]] == "b1234567890" and shorts[ids[3]] == "c1234567890"
    assert short_ids(["abcdefghij"], ["abcdefghij"], minimum=4) == {"abcdefghij": "ghij"}
    for run_id, short in shorts.items():
        assert [i for i in ids if i.endswith(short)] == [run_id]


def test_short_prefixes_are_the_shortest_unique_prefixes() -> None:
    shorts = short_prefixes(IDS, IDS)
    assert shorts[IDS[0]] == IDS[0]  # differs from IDS[1] only in its last character
    assert shorts[IDS[2]] == "r1a2014b"


def test_tree_from_records_adds_up_usage(store: SQLiteStore) -> None:
    records = store.list_runs()
    tree = build_tree(records[0], records)
    assert [c.agent for c in tree.children] == ["agent1", "agent2"]
    assert tree.subtree_usage.input_tokens == 60
    assert tree.usage.input_tokens == 10


def test_age() -> None:
    assert age(None) == "-"
    assert age(100.0, now=142.0) == "42s"
    assert age(0.5, now=7200.5) == "2h"
    assert age(1.0, now=1.0 + 3 * 86400) == "3d"


def _event(kind: EventKind, ts: float, **data: object) -> Event:
    return Event(kind=kind, run_id="r1", agent="a", root_run_id="r1", ts=ts, data=dict(data))


def test_transcript_places_each_turn_at_its_step_and_mail_with_its_text() -> None:
    use = ToolUseBlock("toolu_1", "wait_for_message", {"timeout": 5})
    messages = (
        ChatMessage("user", (TextBlock("the task"),)),
        ChatMessage("assistant", (TextBlock("waiting"), use)),
        ChatMessage("user", (ToolResultBlock("toolu_1", "<mail>hi</mail>"),)),
        ChatMessage("assistant", (TextBlock("done: hi"),)),
    )
    events = [
        _event(EventKind.STARTED, 1.0),
        _event(EventKind.STEP, 2.0, step=1, input_tokens=3, output_tokens=4),
        _event(EventKind.TOOL_CALL, 2.1, tool="wait_for_message", input={"timeout": 5}),
        _event(EventKind.MAIL_DELIVERED, 3.0, mail_id="m1", sender="external"),
        _event(EventKind.STEP, 4.0, step=2, input_tokens=5, output_tokens=6),
        _event(EventKind.COMPLETED, 4.1),
    ]
    mail = [
        Mail(mail_id="m1", sender="external", recipient="r1", content="hi", sent_at=3.0),
        Mail(
            mail_id="m2",
            sender="r9",
            recipient="r1",
            content="late",
            sent_at=5.0,
            state=MailState.ACCEPTED,
        ),
    ]
    record = RunRecord(
        run_id="r1", agent="a", task="the task", root_run_id="r1",
        status=RunStatus.COMPLETED,
        outcome=Outcome(run_id="r1", status=RunStatus.COMPLETED, result="done: hi"),
    )  # fmt: skip
    checkpoint = Checkpoint(run_id="r1", step=2, messages=messages)
    entries = transcript(record, events, checkpoint, mail, names={"r9": "peer"})
    assert [(e.kind, e.text) for e in entries] == [
        ("started", ""),
        ("user", "the task"),
        ("assistant", "waiting"),
        ("tool_use", 'wait_for_message {"timeout": 5}'),
        ("step", "step 1: 3 tokens in, 4 out"),
        # the tool_call event repeats the tool_use above: not shown twice
        ("mail_in", "from external: hi"),
        ("tool_result", "<mail>hi</mail>"),
        ("assistant", "done: hi"),
        ("step", "step 2: 5 tokens in, 6 out"),
        ("completed", "done: hi"),
        ("mail_pending", "from peer (r9) (accepted): late"),
    ]
    # a follower's view: the same entries, without what only the end can place
    live = transcript(record, events[:3], checkpoint, mail, final=False)
    assert [e.kind for e in live] == ["started", "user", "assistant", "tool_use", "step"]


def test_a_step_s_mail_event_shows_each_mail_in_the_transcript_and_a_count_live() -> None:
    ids = ["m1", "m2", "m3"]
    sent = Event(
        kind=EventKind.MAIL_SENT,
        run_id="r1",
        agent="a",
        root_run_id="r1",
        ts=2.0,
        data={"mail_id": "m1", "mail_ids": ids, "count": 3, "recipient": "r2"},
    )
    mail = [
        Mail(mail_id=i, sender="r1", recipient="r2", content=f"say {i}", sent_at=2.0) for i in ids
    ]
    record = RunRecord(run_id="r1", agent="a", task="t", root_run_id="r1")
    entries = transcript(record, [sent], None, mail, names={"r2": "b"}, final=True)
    assert [(e.kind, e.text, e.data["mail_id"]) for e in entries] == [
        ("mail_out", f"to b (r2): say {i}", i) for i in ids
    ]  # and none of them again as pending at the end
    assert "mail_ids" not in entries[0].data
    tree = LiveTree()
    tree.on_event(_event(EventKind.STARTED, 1.0))
    tree.on_event(sent)
    tree.on_event(
        Event(
            kind=EventKind.MAIL_SENT,
            run_id="r1",
            agent="a",
            root_run_id="r1",
            ts=3.0,
            data={"mail_id": "m4", "recipient": "r2"},
        )
    )
    assert tree.rows["r1"].mail == 4
    journal = tree.drain()
    assert journal[1].endswith("a r1  sent 3 mails to r2")
    assert journal[2].endswith("a r1  mailed r2")


def test_the_live_tree_shows_a_parked_run_until_it_has_a_slot_again_or_ends() -> None:
    """A waiting run that lent its slot to a queued run says so (the demo showed five
    children working under a limit of 4, and nothing said why: session 32)."""
    tree = LiveTree()
    tree.on_event(_event(EventKind.STARTED, 1.0))
    tree.on_event(_event(EventKind.WAITING, 1.5))
    tree.on_event(_event(EventKind.PARKED, 2.0, at_wait=True))

    def label() -> str:
        return tree._label(tree.rows["r1"], 3.0).plain

    assert "waiting (parked)" in label()
    tree.on_event(_event(EventKind.UNPARKED, 2.5))
    assert "parked" not in label() and "waiting" in label()
    tree.on_event(_event(EventKind.PARKED, 2.6))
    assert "waiting (parked)" in label()
    tree.on_event(_event(EventKind.COMPLETED, 2.8))
    assert "parked" not in label() and "completed" in label()
    journal = tree.drain()
    assert journal[1].endswith("a r1  parked: waits without its slot, lent to a queued run")
    assert journal[2].endswith("a r1  unparked: has a slot again")
    restarted = LiveTree()  # a new start has its slot
    restarted.on_event(_event(EventKind.PARKED, 1.0))
    restarted.on_event(_event(EventKind.STARTED, 2.0))
    assert "parked" not in restarted._label(restarted.rows["r1"], 3.0).plain


def test_transcript_without_a_checkpoint_shows_tool_calls() -> None:
    record = RunRecord(run_id="r1", agent="a", task="t", root_run_id="r1")
    events = [_event(EventKind.TOOL_CALL, 1.0, tool="lookup", input={"q": "x"})]
    (entry,) = transcript(record, events, None, [])
    assert (entry.kind, entry.text) == ("tool_call", 'lookup {"q": "x"}')


def test_the_store_a_command_was_given_is_named_back_as_a_shell_reads_it(tmp_path: Path) -> None:
    """What a message's hint repeats (``given_store``: `wait --timeout`'s attach/stop): the
    `--state`/`--ray` given, quoted, the password of a database left out; nothing when none
    was given (the copied command reads the same default)."""
    spaced = tmp_path / "my state" / "runs.sqlite3"
    assert given_store(argparse.Namespace(state=spaced, ray=None)) == (
        f" --state {shlex.quote(str(spaced))}"
    )
    url = "postgresql://me:secret@db:5432/runs"
    said = given_store(argparse.Namespace(state=url, ray="ray://head:10001"))
    hidden = shlex.quote("postgresql://me:***@db:5432/runs")  # (a shell would glob ``*``)
    assert said == f" --state {hidden} --ray ray://head:10001"
    assert given_store(argparse.Namespace(state=None, ray="auto")) == " --ray auto"
    assert given_store(argparse.Namespace(state=None, ray=None)) == ""
