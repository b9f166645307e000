"""The ids a ``MailPost`` gives its mails (``supervision/mailing.py``): as
``messages.new_id("m", now)`` makes them, the post's time taken once (its prefix made at
the first id, not for a post of mail that went straight, which needs none)."""

from __future__ import annotations

from subagents.messages import new_id
from subagents.supervision.mailing import MailPost


def test_a_posts_ids_are_new_ids_of_its_time() -> None:
    now = 1_795_756_653.35
    post = MailPost(now)
    ids = [post.new_id() for _ in range(3)]
    reference = new_id("m", now)
    assert len(set(ids)) == 3
    for mail_id in ids:
        assert len(mail_id) == len(reference)
        assert mail_id[:12] == reference[:12] == f"m{int(now * 1000):011x}"
    later = MailPost(now + 1).new_id()
    assert later > max(ids)  # sortable by time, as new_id's
