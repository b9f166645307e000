"""ToolError: the failure a tool reports to the model (an ``is_error`` result).

Why its own module: the tool kit's lower parts (``workspace.py``, ``sandbox.py``) raise it,
and ``base.py`` (the ``Tool`` type) needs ``context.py`` built on them; with the error in
``base.py`` the two imported each other. ``subagents.tools.base.ToolError`` is the same class.
"""

from __future__ import annotations


class ToolError(Exception):
    """A tool failed in a way the model should be told about (``is_error`` result)."""
