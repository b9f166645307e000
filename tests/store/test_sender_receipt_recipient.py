"""A sender's record marks read only the mail sent to its own run (``SaveJournal.read_mail``
names mail ids; one that names another run's mail, a bug or a hostile journal, leaves that
mail as it was), on every store: SQLite in its statement (``recipient = ?``), the others in
``FencedStore.record_mails``' batch (it marked every id given read).

(Reached through a real runtime only on SQLite, whose statement checks it; a store of one's
own that records at the sender without SQLite's statement takes the batch, as these do.)"""

from __future__ import annotations

import pytest
from storekit import mail, run

from subagents.messages import JournalEntry, Lease, MailState, RunStatus
from subagents.store.base import RunStore
from subagents.store.fencing import Fence, FencedStore
from subagents.store.writes import AttemptFence, SaveJournal

LEASE = Lease(owner="h:1:a", host="h", pid=1, renewed_at=1.0, expires_at=16.0)
SEEN = JournalEntry(request_id="s:1", kind="receive", observed=True, result="m0")
DELIVERED = MailState.DELIVERED


def _state(store: RunStore, run_id: str, mail_id: str) -> MailState:
    (found,) = [m for m in store.mail_for(run_id) if m.mail_id == mail_id]
    return found.state


@pytest.mark.parametrize("in_batch", [False, True], ids=["alone", "in_a_batch"])
def test_a_receipt_marks_only_the_mail_sent_to_the_recording_run(
    store: RunStore, in_batch: bool
) -> None:
    fenced = FencedStore(store, Fence(LEASE.owner, store.acquire_lease(LEASE)))
    for run_id in ("s", "other"):
        fenced.save_run(run(run_id, status=RunStatus.RUNNING))
    fenced.save_mails(
        [mail("m0", "o", "s", state=DELIVERED), mail("m9", "o", "other", state=DELIVERED)]
    )
    journal = SaveJournal("s", (SEEN,), ("m0", "m9"))  # m9 is another run's mail
    reply = [mail("m1", "s", "o", state=DELIVERED)]
    if in_batch:  # (SQLite: not its one statement; the batch's writes)
        with fenced.batch():
            fenced.record_mails(reply, journal, AttemptFence("s"))
    else:
        fenced.record_mails(reply, journal, AttemptFence("s"))
    assert _state(store, "s", "m0") is MailState.READ
    assert _state(store, "other", "m9") is DELIVERED
    assert _state(store, "o", "m1") is DELIVERED


@pytest.mark.parametrize("in_batch", [False, True], ids=["alone", "in_a_batch"])
def test_a_receipt_naming_mail_its_run_sent_leaves_that_mail_as_it_was(
    store: RunStore, in_batch: bool
) -> None:
    """``mail_for`` lists the mail a run sent as well as the mail it received: a receipt
    naming a mail the recording run sent (to another run) must not mark it read either."""
    fenced = FencedStore(store, Fence(LEASE.owner, store.acquire_lease(LEASE)))
    for run_id in ("s", "other"):
        fenced.save_run(run(run_id, status=RunStatus.RUNNING))
    fenced.save_mails(
        [mail("m0", "o", "s", state=DELIVERED), mail("m5", "s", "other", state=DELIVERED)]
    )
    journal = SaveJournal("s", (SEEN,), ("m0", "m5"))  # m5: sent by s, not to it
    reply = [mail("m1", "s", "o", state=DELIVERED)]
    if in_batch:
        with fenced.batch():
            fenced.record_mails(reply, journal, AttemptFence("s"))
    else:
        fenced.record_mails(reply, journal, AttemptFence("s"))
    assert _state(store, "s", "m0") is MailState.READ
    assert _state(store, "other", "m5") is DELIVERED
