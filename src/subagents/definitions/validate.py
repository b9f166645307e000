"""Validation: what makes a well-typed ``AgentSpec`` still wrong.

The parsers turn text into typed values; this module judges the values: the name a runtime can
address, the required fields, limits that make sense, and tool names a model can actually be
given. A name is refused only when it is invisible or path-like; any other name that is not
kebab-case loads exactly as written, with a warning. Tool problems are warnings by default --
Claude Code itself ignores a tool it does not know, and new tools appear often -- and become
errors in strict mode. Everything else listed here is an error: a spec with an error is dropped
by the loaders.
"""

from __future__ import annotations

import difflib
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator

import msgspec

from subagents.definitions.errors import LoadIssue
from subagents.definitions.spawn_grant import spawn_setting_problems
from subagents.definitions.spec import RESTART_POLICIES, AgentSpec
from subagents.messages.mail import TOPIC_PREFIX
from subagents.messages.records import CLEANUPS, ON_FAILURE

MAX_NAME_LENGTH = 128
# The names that need no comment: kebab-case or an identifier (``code-reviewer``, ``sqs_v2``).
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
MAX_TIMEOUT = 3600.0
NETWORK_SETTINGS = ("on", "off")
PERMISSION_MODES = ("default", "acceptEdits", "plan", "dontAsk", "bypassPermissions")
"""Claude Code's permission modes (``subagents.tools.modes`` orders them)."""

CLAUDE_CODE_TOOLS = frozenset(
    {
        "Agent",
        "AskUserQuestion",
        "Bash",
        "BashOutput",
        "Edit",
        "ExitPlanMode",
        "Glob",
        "Grep",
        "KillBash",
        "KillShell",
        "LS",
        "ListMcpResourcesTool",
        "MultiEdit",
        "NotebookEdit",
        "NotebookRead",
        "Read",
        "ReadMcpResourceTool",
        "SendMessage",
        "Skill",
        "SlashCommand",
        "Task",
        "TaskCreate",
        "TaskGet",
        "TaskList",
        "TaskOutput",
        "TaskStop",
        "TaskUpdate",
        "TeamCreate",
        "TeamDelete",
        "TodoRead",
        "TodoWrite",
        "WebFetch",
        "WebSearch",
        "Write",
    }
)
RUNTIME_TOOLS = frozenset(
    {
        "spawn_subagent",
        "send_message",
        "check_mailbox",
        "wait_for_message",
        "stop_subagent",
        "load_skill",
        "fan_out",
        "subscribe",
        "unsubscribe",
    }
)
"""The runtime's own tools: the default of a loader no runtime configured. A Runtime
assembles its set from its parts (``Runtime.tool_names``) and hands it to ``known_tools``."""
MCP_PREFIX = "mcp__"


def known_tools(tool_names: Iterable[str] = RUNTIME_TOOLS) -> frozenset[str]:
    """Every tool name a definition may list, given ``tool_names``: the tools a runtime
    actually has (its own, the user's, the built-in tools it implements), assembled by the
    runtime from its parts. Claude Code's tool names are always accepted (a definition
    written for Claude Code may name one this runtime lacks; it is then not offered), and so
    is any ``mcp__server__tool`` name. Anything else is an unknown tool: a warning, or an
    error in strict mode."""
    return CLAUDE_CODE_TOOLS | frozenset(tool_names)


KNOWN_TOOLS: frozenset[str] = known_tools()


class Finding(msgspec.Struct, frozen=True):
    """An issue plus the frontmatter field (camelCase) it is about, so callers can add a line."""

    field: str | None
    issue: LoadIssue


def _shown(name: str) -> str:
    return repr(name if len(name) <= 60 else name[:60] + "...")


def _invisible(char: str) -> bool:
    """Control/format characters and every space but U+0020: a reader cannot see or type them."""
    category = unicodedata.category(char)
    return category in INVISIBLE_CATEGORIES or (category == "Zs" and char != " ")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an agent at all (an error: the file is not loaded), or None.

    Only names that are invisible or path-like are refused: spaces, capitals, '/' inside a name
    ("Python DevOps/CI-CD Expert") are how people write names, and Claude Code loads them, so
    those are ``name_warning``'s business. Refused: an empty or blank name, control/format
    characters (and spaces other than U+0020), leading or trailing whitespace, more than
    MAX_NAME_LENGTH characters, a backslash, a leading '/' or '.', a '..' path component, a
    leading ``topic:`` (mail so addressed is a topic's: the agent could not be mailed by name,
    and mail meant for it reached the topic's subscribers).
    """
    if not name.strip():
        return "name is empty"
    shown = _shown(name)
    if not (name.isascii() and name.isprintable()):  # printable ASCII has no invisible char
        for char in name:
            if _invisible(char):
                return f"name {shown} contains a control or invisible character U+{ord(char):04X}"
    if name != name.strip():
        return f"name {shown} starts or ends with whitespace"
    if len(name) > MAX_NAME_LENGTH:
        return f"name {shown} is {len(name)} characters long; the limit is {MAX_NAME_LENGTH}"
    if "\\" in name:
        return f"name {shown} contains a backslash (a path separator)"
    if ".." in name.split("/"):
        return f"name {shown} contains a '..' path component"
    if name[0] in "/.":
        return f"name {shown} starts with {name[0]!r}, like a path"
    if name.startswith(TOPIC_PREFIX):  # the mail room reads the address as a topic first
        return (
            f"name {shown} starts with {TOPIC_PREFIX!r}, a topic's address: mail to it would"
            " go to the topic's subscribers, never to the agent"
        )
    return None


def kebab(name: str) -> str:
    """``"Python DevOps/CI-CD Expert"`` -> ``"python-devops-ci-cd-expert"``; '' if none is left."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:MAX_NAME_LENGTH].strip("-")


def name_warning(name: str) -> str | None:
    """Why a loadable ``name`` (``name_problem`` is None) is awkward to use, or None.

    Such a name loads exactly as written -- renaming it would break every prompt, ``spawn`` and
    mail that refers to it -- but the author should hear that it must be typed exactly.
    """
    if NAME_PATTERN.match(name):
        return None
    hint = kebab(name)
    suggestion = f"; consider a kebab-case name such as {hint!r}" if hint else ""
    return (
        f"name {_shown(name)} is not kebab-case: it loads as written, and spawn and mail must "
        f"use it exactly{suggestion}"
    )


def strict_name_problem(name: str) -> str | None:
    """``name_problem`` plus the name pattern itself, for names that must stay simple (skills)."""
    problem = name_problem(name)
    if problem or NAME_PATTERN.match(name):
        return problem
    hint = kebab(name)
    suggestion = f" (for example {hint!r})" if hint else ""
    return (
        f"name {_shown(name)} is not allowed: use letters, digits, '-', '_' and '.', starting "
        f"with a letter or digit{suggestion}"
    )


def number_problem(value: object, *, integer: bool, low: float, low_ok: bool) -> str | None:
    """Why ``value`` cannot be a limit or a budget (``... must be ...``), or None. NaN and
    infinity are refused: a NaN compares false with everything, so a NaN budget would
    silently turn its limit off."""
    if value is None:
        return None
    kind = "a whole number" if integer else "a number"
    bound = f">= {low:g}" if low_ok else f"> {low:g}"
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        return f"must be {kind} {bound}, got {value!r}"
    if not math.isfinite(value):
        return f"must be a finite number {bound}, got {value!r}"
    if value < low or (value == low and not low_ok):
        return f"must be {kind} {bound}, got {value!r}"
    return None


def tool_base(tool: str) -> str:
    """``Bash(git diff:*)`` -> ``Bash``: Claude Code permission patterns name a tool first."""
    return tool.split("(", 1)[0].strip()


def check(
    spec: AgentSpec,
    *,
    known_tools: frozenset[str] = KNOWN_TOOLS,
    extra_tools: Iterable[str] = (),
    strict: bool = False,
) -> list[Finding]:
    """Every problem of ``spec``, each with the field it concerns."""
    allowed = known_tools | frozenset(extra_tools)
    problems = [
        *_identity_problems(spec),
        *_number_problems(spec),
        *_choice_problems(spec),
        *_tool_problems(spec, allowed, "error" if strict else "warning"),
    ]
    return [
        Finding(
            field,
            LoadIssue(
                reason=reason,
                file=spec.source,
                name=spec.name or None,
                severity="error" if severity == "error" else "warning",
            ),
        )
        for field, reason, severity in problems
    ]


# One problem of a definition: the field it concerns (None: the body), why, "error" or "warning".
Problem = tuple[str | None, str, str]


def _identity_problems(spec: AgentSpec) -> Iterator[Problem]:
    """The name, the description and the system prompt."""
    problem = name_problem(spec.name)
    if problem:
        yield ("name", problem, "error")
    else:
        warning = name_warning(spec.name)
        if warning:
            yield ("name", warning, "warning")
    if not spec.description.strip():
        yield ("description", "missing required field 'description'", "error")
    if not spec.prompt.strip() and spec.extends is None:  # else: the parent's prompt
        yield (None, "the system prompt (the markdown body) is empty", "warning")


def _number_problems(spec: AgentSpec) -> Iterator[Problem]:
    """The limits, the timeout and the budgets: numbers in their ranges."""
    for field, value in (
        ("maxTurns", spec.max_turns),
        ("maxDepth", spec.max_depth),
        ("maxChildren", spec.max_children),
        ("tokenBudget", spec.token_budget),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value <= 0
        ):
            yield (field, f"{field} must be a positive whole number, got {value}", "error")
    timeout = spec.timeout
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        shown = f"{timeout:g}" if isinstance(timeout, int | float) else repr(timeout)
        reason = f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} s, got {shown}"
        yield ("timeout", reason, "error")
    limits: tuple[tuple[str, object, bool, float, bool], ...] = (
        ("maxRestarts", spec.max_restarts, True, 0, True),
        ("maxRetries", spec.max_retries, True, 0, True),
        ("restartPeriod", spec.restart_period, False, 0, False),
        ("restartBackoff", spec.restart_backoff, False, 0, True),
        ("restartBackoffMax", spec.restart_backoff_max, False, 0, True),
        ("costBudget", spec.cost_budget, False, 0, False),
    )
    for field, number, integer, low, low_ok in limits:
        problem = number_problem(number, integer=integer, low=low, low_ok=low_ok)
        if problem is not None:
            yield (field, f"{field} {problem}", "error")


def _choice_problems(spec: AgentSpec) -> Iterator[Problem]:
    """The fields that take one of a few values, ``extends``, and the spawn settings."""
    choices: tuple[tuple[str, object, tuple[str, ...]], ...] = (
        ("onFailure", spec.on_failure, ON_FAILURE),
        ("cleanup", spec.cleanup, CLEANUPS),
        ("network", spec.network, NETWORK_SETTINGS),
    )
    for field, choice, options in choices:
        if choice is not None and choice not in options:
            yield (field, f"{field} must be one of {', '.join(options)}, got {choice!r}", "error")
    if spec.tier is not None and not 0 <= spec.tier <= 3:
        yield ("tier", f"tier must be 0, 1, 2 or 3, got {spec.tier}", "error")
    if spec.restart not in RESTART_POLICIES:
        reason = f"restart must be 'temporary' or 'transient', got {spec.restart!r}"
        yield ("restart", reason, "error")
    if spec.permission_mode is not None and spec.permission_mode not in PERMISSION_MODES:
        reason = (
            f"permissionMode must be one of {', '.join(PERMISSION_MODES)},"
            f" got {spec.permission_mode!r}"
        )
        yield ("permissionMode", reason, "error")
    if spec.extends is not None and spec.extends == spec.name:
        yield ("extends", f"extends names the definition itself ({spec.name!r})", "error")
    for key, reason in spawn_setting_problems(spec):
        yield (key, reason, "error")


def _tool_problems(spec: AgentSpec, allowed: frozenset[str], severity: str) -> Iterator[Problem]:
    """Tool names no tool answers to (an MCP tool is the server's to know), with the closest
    known name as a hint."""
    tool_lists = (
        ("tools", spec.tools or ()),
        ("disallowedTools", spec.disallowed_tools),
        ("+tools", spec.additions.get("tools", ())),
        ("+disallowedTools", spec.additions.get("disallowed_tools", ())),
    )
    for field, tools in tool_lists:
        for tool in tools:
            base = tool_base(tool)
            if base in allowed or base.startswith(MCP_PREFIX):
                continue
            close = difflib.get_close_matches(base, sorted(allowed), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            yield (field, f"{field}: unknown tool {tool!r}{hint}", severity)


def validate(
    spec: AgentSpec,
    *,
    known_tools: frozenset[str] = KNOWN_TOOLS,
    extra_tools: Iterable[str] = (),
    strict: bool = False,
) -> list[LoadIssue]:
    """Every problem of ``spec``; ``strict`` turns tool problems into errors."""
    return [
        f.issue
        for f in check(spec, known_tools=known_tools, extra_tools=extra_tools, strict=strict)
    ]
