"""What a reload may change of a definition already given out: its words, and a narrowing
of its tools; nothing else until a restart.

Why (session 28): with ``hot_reload_s`` set, a run that can write an agents folder (its
workspace's ``.claude/agents``, a folder in ``Sandbox(writable=...)``, any folder when its
commands are not sandboxed) could rewrite its own definition, or another's, and the next
runs of that agent took the new one: ``tools: Bash`` where the owner gave ``Read, Grep``, a
``permissionMode``, a wider ``mcpServers``, no ``isolation``, higher limits. Session 27
held only hooks and inline servers (``commands_at_start.py``). The rule is an allowlist, so
it fails closed: a field not named in ``WORDS`` (one added to ``AgentSpec`` later
included) changes only by a restart, but for ``tools`` and ``disallowedTools``, which may
narrow (fewer entries offered, more denied: the owner tightening an agent live). What a
prompt says is not an escalation: the tools, permissions and sandbox hold whatever the
model is told.

Compared with the definition last given out, not the first read: a narrowing then a
widening back is refused too (a run that narrowed an agent cannot launder a widening).
"""

from __future__ import annotations

import msgspec

from subagents.definitions.spec import AgentSpec

WORDS = frozenset(
    {"description", "prompt", "initial_prompt", "color", "effort", "source", "category", "level"}
)
"""Fields a reload takes freely: what the model is told and how the definition is shown
(``source``, ``category`` and ``level`` say where the file is: the same definition moved)."""
NARROWING = ("tools", "disallowed_tools")
FIELDS = tuple(f.name for f in msgspec.structs.fields(AgentSpec))


def widened(last: AgentSpec, new: AgentSpec) -> tuple[str, ...]:
    """The fields of ``new`` that change ``last`` in a way a reload may not take: any change
    but of ``WORDS``, and of ``tools`` one that offers an entry ``last`` did not (``last``
    offering every tool, None, any list narrows), of ``disallowed_tools`` one that drops an
    entry. () when ``new`` may replace ``last``."""
    out: list[str] = []
    for name in FIELDS:
        if name in WORDS:
            continue
        was, now = getattr(last, name), getattr(new, name)
        if was == now:
            continue
        if name == "tools" and now is not None and (was is None or set(now) <= set(was)):
            continue
        if name == "disallowed_tools" and set(now) >= set(was):
            continue
        out.append(name)
    return tuple(out)
