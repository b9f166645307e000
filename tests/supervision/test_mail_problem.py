"""``mail_problem``: a mail's own fields checked (types, encoding, size), on the sender's thread
(``actors/mail_desk.py``) and in the mail room alike. Most mail is ASCII within the cap and is
answered by a short path of C calls; that path must give the same answers as the full checks
at its edges: a lone surrogate in ANY text field while the others are plain, a text at the cap
(counted in characters, not UTF-8 bytes) and one over it, the first problem named when there
are several."""

from __future__ import annotations

from typing import Any

import pytest

from subagents.messages import SendMail
from subagents.supervision.limits import Limits
from subagents.supervision.requests import mail_problem

CAP = 8
LIMITS = Limits(max_text_chars=CAP)
SURROGATE = "a\ud800b"


def _mail(**fields: Any) -> SendMail:
    return SendMail(request_id="q-1", sender="r-1", **{"to": "r-2", "content": "hi", **fields})


def _surrogate_named(what: str) -> str:
    return f"{what} holds a lone surrogate ('\\ud800' at position 1), which UTF-8 cannot encode"


@pytest.mark.parametrize(
    ("field", "what"),
    [("to", "the recipient"), ("reply_to", "reply_to"), ("content", "the mail")],
)
def test_a_lone_surrogate_in_any_one_field_is_named_while_the_rest_is_plain(
    field: str, what: str
) -> None:
    """Each text is checked on its own: a short path that looked only at the content (the
    field most mail varies in) would let a recipient or reply_to through that the store then
    cannot encode, inside the supervisor or on the sender's thread."""
    assert mail_problem(_mail(**{field: SURROGATE}), LIMITS) == _surrogate_named(what)
    with_reply_to = _mail(**{"reply_to": "m-1", field: SURROGATE})
    assert mail_problem(with_reply_to, LIMITS) == _surrogate_named(what)


@pytest.mark.parametrize("char", ["x", "\x00", "\x1b", "é", "😀"])
def test_a_mail_at_the_cap_is_kept_and_one_over_is_refused_counting_characters(
    char: str,
) -> None:
    """The cap counts characters, whatever their UTF-8 size (an emoji is 4 bytes, one
    character); control characters and NUL are text like any other here."""
    assert mail_problem(_mail(content=char * CAP), LIMITS) is None
    assert mail_problem(_mail(content=char * CAP, reply_to=char, to=f"r-{char}"), LIMITS) is None
    assert mail_problem(_mail(content=char * (CAP + 1)), LIMITS) == (
        f"the mail is {CAP + 1} characters, over the cap of {CAP}"
        " (Limits.max_text_chars; raise it, or hand the text over as a file)"
    )


def test_the_first_problem_is_named_recipient_then_reply_to_then_the_mail() -> None:
    over = "x" * (CAP + 1)
    assert mail_problem(_mail(to=SURROGATE, reply_to=SURROGATE, content=over), LIMITS) == (
        _surrogate_named("the recipient")
    )
    assert mail_problem(_mail(reply_to=SURROGATE, content=over), LIMITS) == (
        _surrogate_named("reply_to")
    )
    assert mail_problem(_mail(content=SURROGATE + "x" * CAP), LIMITS) == (
        f"the mail is {CAP + 3} characters, over the cap of {CAP}"
        " (Limits.max_text_chars; raise it, or hand the text over as a file)"
    )


class _Text(str):
    """A ``str`` subclass (a caller's own text type): a string all the same."""


def test_types_are_checked_first_and_a_str_subclass_is_a_string() -> None:
    assert mail_problem(_mail(to=3), LIMITS) == "to and content must be strings, got int and str"
    assert mail_problem(_mail(content=b"hi"), LIMITS) == (
        "to and content must be strings, got str and bytes"
    )
    assert mail_problem(_mail(reply_to=7), LIMITS) == "reply_to must be a string, got 7"
    assert mail_problem(_mail(to=_Text("r-2"), content=_Text("hi")), LIMITS) is None
    assert mail_problem(_mail(content=_Text("x" * (CAP + 1))), LIMITS) is not None
    assert mail_problem(_mail(reply_to=_Text(SURROGATE)), LIMITS) == _surrogate_named("reply_to")
