"""``end_orphans``: the writes that end orphaned runs where they lie, as a cancel walk would."""

from __future__ import annotations

from typing import Any

from subagents.messages import (
    EventKind,
    Mail,
    MailState,
    RunRecord,
    RunStatus,
    Usage,
)
from subagents.store.writes import (
    AppendEvent,
    OutcomeDelivered,
    SaveOutcome,
    SaveRun,
    SetMailsState,
)
from subagents.supervision.orphan_stops import end_orphans


def _run(run_id: str, parent: str | None, depth: int, status: RunStatus, **kw: Any) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent=f"a-{run_id}",
        task="t",
        parent_run_id=parent,
        root_run_id="top" if parent is not None or run_id == "top" else run_id,
        depth=depth,
        status=status,
        created_at=1.0,
        **kw,
    )


def _mail(mail_id: str, state: MailState) -> Mail:
    return Mail(
        mail_id=mail_id, sender="top", recipient="leaf", content="x", state=state, sent_at=2.0
    )


def test_the_subtree_ends_deepest_first_each_cancelled_with_its_outcome_and_event() -> None:
    top = _run("top", "boss", 1, RunStatus.WAITING, usage=Usage(input_tokens=7))
    leaf = _run("leaf", "top", 2, RunStatus.RUNNING, steps=3)
    done = _run("done", "top", 2, RunStatus.COMPLETED)
    mails = [_mail("m1", MailState.DELIVERED), _mail("m2", MailState.READ)]
    writes = end_orphans([top, leaf, done], reason="gone", now=50.0, unread={"leaf": mails})
    saved = [w.record for w in writes if isinstance(w, SaveRun)]
    assert [r.run_id for r in saved] == ["leaf", "top"]  # deepest first; the ended one left
    assert {r.status for r in saved} == {RunStatus.CANCELLED} and {r.ended_at for r in saved} == {
        50.0
    }
    outcomes = {w.outcome.run_id: w.outcome for w in writes if isinstance(w, SaveOutcome)}
    assert outcomes["top"].error == "gone" and outcomes["top"].usage.input_tokens == 7
    assert outcomes["leaf"].steps == 3 and outcomes["leaf"].error_kind == "cancelled"
    # the leaf's parent ends too: nobody to tell; the top's parent may be resumed and told
    assert [w.run_id for w in writes if isinstance(w, OutcomeDelivered)] == ["leaf"]
    assert [w for w in writes if isinstance(w, SetMailsState)] == [
        SetMailsState(("m1",), MailState.DEAD)
    ]
    events = [(w.event.run_id, w.event.kind) for w in writes if isinstance(w, AppendEvent)]
    assert events == [
        ("leaf", EventKind.CANCELLED),
        ("leaf", EventKind.DEAD_LETTER),
        ("top", EventKind.CANCELLED),
    ]


def test_nothing_to_end_is_no_writes() -> None:
    done = _run("top", None, 0, RunStatus.FAILED)
    assert end_orphans([done], reason="gone", now=1.0, unread={}) == []
