"""Templates for the offline scripted model: a safe formatter and the values it fills in.

Why a hand-written formatter: scripts are user data, and ``str.format`` raises on any brace it
does not understand and allows attribute access (``{task.__class__}``). Here only bare names are
placeholders, ``{{`` and ``}}`` are literal braces, and anything unknown stays as written, so a
script can never crash a run by its templating.

The values come from the conversation the model is shown: the task (first user message), the
last user message's text and tool results, and the last mail the runtime rendered into it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import msgspec

from subagents.messages import ChatMessage, TextBlock, ToolResultBlock

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")

# The runtime renders each mail as
# <mail id="ID" from="RUN_ID" agent="AGENT_NAME"[ reply_to="ID"]>CONTENT</mail>
# Attribute order is not relied upon; values are XML-escaped.
_MAIL_TAG = re.compile(r"<mail((?:\s+[A-Za-z_]+=\"[^\"]*\")*)\s*>(.*?)</mail>", re.DOTALL)
_MAIL_ATTR = re.compile(r"([A-Za-z_]+)=\"([^\"]*)\"")


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill ``{name}`` placeholders from ``values``; unknown names are left as written.

    A template without braces is returned as it is, without reading ``values`` (which may be
    ``LazyValues``: most scripted turns have no placeholder)."""
    if "{" not in template and "}" not in template:
        return template

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        return values.get(name, token)

    return _PLACEHOLDER.sub(substitute, template)


def render_value(value: Any, values: Mapping[str, str]) -> Any:
    """Render every string inside a JSON-like value (dicts, lists), recursively."""
    if isinstance(value, str):
        return render(value, values)
    if isinstance(value, Mapping):
        return {key: render_value(item, values) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [render_value(item, values) for item in value]
    return value


class MailTag:
    """The attributes and content of one ``<mail ...>`` tag found in a message."""

    __slots__ = ("agent", "content", "mail_id", "reply_to", "sender")

    def __init__(
        self, mail_id: str, sender: str, agent: str, content: str, reply_to: str | None
    ) -> None:
        self.mail_id = mail_id
        self.sender = sender
        self.agent = agent
        self.content = content
        self.reply_to = reply_to


def find_mail_tags(text: str) -> list[MailTag]:
    """Every mail tag in ``text``, in order."""
    tags = []
    for match in _MAIL_TAG.finditer(text):
        attrs = {k: html.unescape(v) for k, v in _MAIL_ATTR.findall(match.group(1))}
        tags.append(
            MailTag(
                mail_id=attrs.get("id", ""),
                sender=attrs.get("from", ""),
                agent=attrs.get("agent", ""),
                content=match.group(2),
                reply_to=attrs.get("reply_to"),
            )
        )
    return tags


def _last_user_message(messages: tuple[ChatMessage, ...]) -> ChatMessage | None:
    for message in reversed(messages):
        if message.role == "user":
            return message
    return None


def _first_user_message(messages: tuple[ChatMessage, ...]) -> ChatMessage | None:
    for message in messages:
        if message.role == "user":
            return message
    return None


class LazyValues(Mapping[str, str]):
    """``template_values`` worked out on first use only: reading a conversation's results
    and mail tags is work on every model call, for turns that mostly have no placeholder."""

    def __init__(self, make: Callable[[], dict[str, str]]) -> None:
        self._make: Callable[[], dict[str, str]] | None = make
        self._values: dict[str, str] = {}

    def _get(self) -> dict[str, str]:
        if self._make is not None:
            self._values, self._make = self._make(), None
        return self._values

    def __getitem__(self, key: str) -> str:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def template_values(
    messages: tuple[ChatMessage, ...], *, agent: str, run_id: str, turn: int
) -> dict[str, str]:
    """The placeholder values for one turn of one run.

    ``{task}`` first user message's text; ``{last}`` last user message's text; ``{results}``
    its tool results joined by newlines and ``{result0}``, ``{result1}``... each one; for a
    result that is a JSON object, ``{result0_KEY}`` its scalar fields and ``{results_KEY}``
    that field of every result, one per line; ``{mail_*}`` the last mail tag in the last user
    message (text or tool results).
    """
    first = _first_user_message(messages)
    last = _last_user_message(messages)
    values: dict[str, str] = {
        "agent": agent,
        "run_id": run_id,
        "turn": str(turn),
        "task": first.text if first is not None else "",
        "last": last.text if last is not None else "",
        "results": "",
        "mail_from": "",
        "mail_agent": "",
        "mail_content": "",
        "mail_id": "",
        "mail_reply_to": "",
    }
    if last is None:
        return values
    results = [b.content for b in last.content if isinstance(b, ToolResultBlock)]
    values["results"] = "\n".join(results)
    fields = [_json_fields(content) for content in results]
    for index, (content, known) in enumerate(zip(results, fields, strict=True)):
        values[f"result{index}"] = content
        values.update({f"result{index}_{key}": value for key, value in known.items()})
    # {results_result}: every result's field, one per line (a result without it: its content).
    for key in sorted({key for known in fields for key in known}):
        values[f"results_{key}"] = "\n".join(
            known.get(key, content) for content, known in zip(results, fields, strict=True)
        )
    tags: list[MailTag] = []
    for block in last.content:
        if isinstance(block, TextBlock):
            tags.extend(find_mail_tags(block.text))
        elif isinstance(block, ToolResultBlock):
            tags.extend(find_mail_tags(block.content))
    if tags:
        mail = tags[-1]
        values["mail_from"] = mail.sender
        values["mail_agent"] = mail.agent
        values["mail_content"] = mail.content
        values["mail_id"] = mail.mail_id
        values["mail_reply_to"] = mail.reply_to or ""
    return values


def _json_fields(content: str) -> dict[str, str]:
    """The scalar fields of a tool result that is a JSON object (for ``{result0_status}``).

    A spawn's result is ``{result, run_id, status, usage}``; scripts that combine what children
    returned want the fields, not the JSON.
    """
    if not content.startswith("{"):
        return {}
    try:
        data = msgspec.json.decode(content)
    except msgspec.DecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        key: "" if value is None else str(value)
        for key, value in data.items()
        if isinstance(key, str) and (value is None or isinstance(value, str | int | float | bool))
    }
