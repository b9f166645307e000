"""Print the code that makes your shell complete `subagents` (`subagents completion bash`).

Why argcomplete: it completes from the command's own argparse parser (every sub-command,
option and choice, kept true as they change, nothing hand-written per shell), bash, zsh and
fish alike, and lets an argument complete from live data: a `RUN` from the runs in the store
(the short ids every view shows), an `AGENT` from the definitions `subagents agents` lists.

How: the shell code `subagents completion SHELL` prints (argcomplete's) calls `subagents`
with ``_ARGCOMPLETE`` set at each TAB; ``main`` then hands the whole parser to ``complete``,
which prints the candidates and exits, before anything else runs. Only then is argcomplete
imported: `subagents --version` does not pay for it.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from subagents.store.base import RunStore

NAME = "completion"
SHELLS = ("bash", "zsh", "fish")
RECENT_RUNS = 50
"""How many runs, the latest active, a RUN completes from."""
SCANNED_EVENTS = 20_000
"""The most events a TAB reads back to find them (a chatty tree may fill many)."""
PAGE = 2_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "shell",
        nargs="?",
        choices=SHELLS,
        default=None,
        help="the shell to print the completion code for (default: $SHELL's)",
    )


def run(args: argparse.Namespace) -> int:
    """Print the code that makes ``args.shell`` complete `subagents` (add it to the shell's
    start-up file: ``eval "$(subagents completion bash)"``)."""
    from subagents.cli.state import EXIT_USAGE

    if args.shell is None and _login_shell() is None:
        from subagents.cli import output

        output.error(NAME, f"name the shell: one of {', '.join(SHELLS)} ($SHELL is not one)")
        return EXIT_USAGE
    from argcomplete.shell_integration import shellcode

    shell = args.shell or _login_shell() or "bash"
    print(shellcode(["subagents"], shell=shell), end="")
    return 0


def _login_shell() -> str | None:
    name = os.path.basename(os.environ.get("SHELL", ""))
    return name if name in SHELLS else None


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell asking for completions (``_ARGCOMPLETE`` set): argcomplete prints the
    candidates for the word under the cursor and exits the process."""
    import argcomplete

    for action in _actions(parser):
        if action.metavar == "RUN" or action.dest == "run_ref":
            action.completer = complete_runs  # type: ignore[attr-defined]
        elif action.metavar == "AGENT":
            action.completer = complete_agents  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser)


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every action of ``parser`` and of its sub-commands' parsers."""
    found: list[argparse.Action] = []
    for action in parser._actions:
        found.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _actions(sub)
    return found


def complete_runs(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The runs of the store the command line names (``--state``, else the user's default)
    last active, by the short ids the views show, and by full id once the word looks like
    one. Nothing (rather than an error) when there is no store to read."""
    from subagents.cli.state import CliError, open_existing_store, short_id
    from subagents.store.base import StoreError

    try:
        with open_existing_store(getattr(parsed_args, "state", None)) as store:
            runs = [r for r in map(store.get_run, latest_runs(store)) if r is not None]
    except (CliError, StoreError, OSError):
        return []
    full = prefix.startswith("r") and len(prefix) > 8
    words = [r.run_id if full else short_id(r.run_id) for r in runs]
    return [w for w in words if w.startswith(prefix)]


def latest_runs(store: RunStore) -> list[str]:
    """The ``RECENT_RUNS`` runs whose events are the store's last (the latest first), read
    back from its last event, at most ``SCANNED_EVENTS`` events.

    Why from the events: the store numbers them in one order (``events_after``, by its
    primary key), so a TAB reads what is recent, whatever the store's size; listing the
    runs read every record (a second and more per TAB on a store of 100,000 runs, and
    nothing at all if one old record was damaged)."""
    found: dict[str, None] = {}
    end = store.last_event_seq()
    floor = max(0, end - SCANNED_EVENTS)
    while end > floor and len(found) < RECENT_RUNS:
        start = max(floor, end - PAGE)
        page = store.events_after(start, limit=end - start)
        for stored in reversed(page):
            found.setdefault(stored.event.run_id)
        end = start
    return list(found)[:RECENT_RUNS]


def complete_agents(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The agent definitions `subagents agents` would list from here (``--agents`` too)."""
    from pathlib import Path

    from subagents.definitions import DefinitionLoader, default_sources
    from subagents.definitions.catalog import Catalog

    dirs = tuple(Path(d) for d in getattr(parsed_args, "agent_dirs", None) or ())
    try:
        specs = Catalog(DefinitionLoader(default_sources(cwd=Path.cwd(), dirs=dirs))).list()
    except Exception:  # a broken definition must not break the shell's TAB
        return []
    return sorted(name for name in {s.name for s in specs} if name.startswith(prefix))
