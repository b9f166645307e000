"""Stop, send, continue from the page: what `subagents stop/send/continue` do, for one run.

Why through the store: the console does not host the runs it shows (a `subagents run` in a
terminal does, or a detached host); like the CLI it posts a stop or a mail as a command in
the store, and the process hosting the run acts on it within a second. Continuing an ended
run needs a process to host the new run: the console starts `subagents continue --detach`
(a background host of its own, as from a terminal) and returns the new run's id.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from subagents.cli.orphan_stop import can_end_here, end_orphaned
from subagents.console.limits import clipped
from subagents.store.leases import Liveness

if TYPE_CHECKING:
    from subagents.cli.state import InspectedStore
    from subagents.messages import RunRecord

TEXT_CAP = 1_000_000
"""The most characters a mail or a continuation may have (the runtime's cap on a task)."""
CONTINUE_TIMEOUT_S = 120.0


class ActionError(Exception):
    """An action refused; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 409) -> None:
        super().__init__(message)
        self.status = status


class Posted(msgspec.Struct, frozen=True, kw_only=True):
    """What an action did: the command posted (stop, send) or the run started (continue)."""

    kind: str
    run_id: str
    command_id: int | None = None
    orphaned: bool = False
    """The run's host is gone: the command waits for `subagents resume`."""
    message: str


def find_run(store: InspectedStore, ref: str) -> RunRecord:
    """The run ``ref`` names: a full id, or a unique prefix or suffix of one, as the command
    line takes them (the short ids every view shows); ``ActionError`` (404) otherwise, an
    ambiguous reference's message naming the matches."""
    from subagents.cli.state import CliError, resolve

    record = store.get_run(ref)
    if record is not None:
        return record
    if ref.startswith("#"):  # a row of the command line's last listing: not the page's
        raise ActionError(f"no run {clipped(ref)} in the store", 404)
    try:
        return resolve(store, ref)
    except CliError as exc:
        ambiguous = "ambiguous" in str(exc)  # then say which runs it could be
        said = str(exc) if ambiguous else f"no run {clipped(ref)} in the store"
        raise ActionError(said, 404) from None


def _live_run(store: InspectedStore, run_id: str, doing: str) -> RunRecord:
    record = find_run(store, run_id)
    run_id = record.run_id
    if record.status.terminal:
        raise ActionError(
            f"run {run_id} ({record.agent}) has already ended ({record.status}): nothing to {doing}"
        )
    return record


def _orphaned(store: InspectedStore, record: RunRecord) -> bool:
    return Liveness(store.leases(), listed=getattr(store, "host_listed", None)).orphaned(record)


def stop(store: InspectedStore, run_id: str) -> Posted:
    """Stop the run and its subtree as `subagents stop RUN` does: a stop posted for the
    process hosting it; a run whose host is gone, ended in a local store at once, without
    resuming it (``cli.orphan_stop``)."""
    record = _live_run(store, run_id, "stop")
    run_id = record.run_id
    orphaned = _orphaned(store, record)
    if orphaned and can_end_here(store):
        ended = end_orphaned(store, run_id)
        if ended is not None:  # else a `resume` took it up meanwhile: its host stops it
            return Posted(
                kind="stop",
                run_id=run_id,
                orphaned=True,
                message=f"{record.agent}'s host was gone (orphaned): it and {len(ended) - 1}"
                " run(s) under it were cancelled in the store now, without resuming them",
            )
    orphaned = orphaned and not can_end_here(store)
    command_id = store.post_command("stop", run_id)
    then = (
        "its host is gone (orphaned): the stop waits until `subagents resume` takes it up"
        if orphaned
        else "the process hosting it stops it and its subtree within a second"
    )
    return Posted(
        kind="stop",
        run_id=run_id,
        command_id=command_id,
        orphaned=orphaned,
        message=f"stop posted for {record.agent}; {then}",
    )


def checked_text(text: object) -> str:
    """The text of a send or continue: a non-blank JSON string, under the cap (a number or a
    list is named as such, not taken for an empty text)."""
    if text is not None and not isinstance(text, str):
        raise ActionError(f"the text must be a JSON string, not {json_kind(text)}", 400)
    if text is None or not text.strip():
        raise ActionError("the text is empty: nothing to send", 400)
    if len(text) > TEXT_CAP:
        raise ActionError(f"the text has {len(text)} characters, over the cap of {TEXT_CAP}", 400)
    return text


def json_kind(value: object) -> str:
    """What a decoded JSON value is, as JSON names it (for an error naming what was sent)."""
    kinds = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    kinds |= {list: "an array", dict: "an object", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def checked_reason(reason: object) -> str | None:
    """The reason given with an answer: text (``None`` or blank: none), under the cap."""
    if reason is None or (isinstance(reason, str) and not reason.strip()):
        return None
    if not isinstance(reason, str):
        raise ActionError("the reason must be text", 400)
    if len(reason) > TEXT_CAP:
        raise ActionError(
            f"the reason has {len(reason)} characters, over the cap of {TEXT_CAP}", 400
        )
    return reason


def send(store: InspectedStore, run_id: str, text: object) -> Posted:
    """Post mail from `external` for the run (`subagents send RUN TEXT`)."""
    content = checked_text(text)
    record = _live_run(store, run_id, "mail")
    run_id = record.run_id
    orphaned = _orphaned(store, record)
    command_id = store.post_command("send", run_id, content)
    then = (
        "its host is gone (orphaned): the mail waits until `subagents resume` takes the run up"
        if orphaned
        else "the process hosting it delivers it within a second"
    )
    return Posted(
        kind="send",
        run_id=run_id,
        command_id=command_id,
        orphaned=orphaned,
        message=f"mail posted for {record.agent}; {then}",
    )


def continue_run(
    store: InspectedStore, run_id: str, text: object, *, command: ContinueCommand
) -> Posted:
    """Start a background host going on with the ended run's conversation and ``text``
    (`subagents continue --detach RUN -`, the text on stdin, so no other user of the
    machine reads it in the process list); the new run's id."""
    content = checked_text(text)
    record = find_run(store, run_id)
    run_id = record.run_id
    if not record.status.terminal:
        raise ActionError(f"run {run_id} is {record.status}: only an ended run can be continued")
    argv = command.argv(run_id)
    try:
        done = subprocess.run(
            argv,
            input=content,
            capture_output=True,
            text=True,
            timeout=CONTINUE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ActionError(f"`subagents continue` could not be run: {exc}", 500) from exc
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise ActionError(said[-1] if said else f"`subagents continue` exited {done.returncode}")
    try:
        new_id = str(json.loads(done.stdout)["run_id"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ActionError(f"`subagents continue` said {done.stdout!r}: no run id", 500) from exc
    return Posted(
        kind="continue",
        run_id=new_id,
        message=f"{record.agent} goes on as run {new_id}, in a background host",
    )


class ContinueCommand(msgspec.Struct, frozen=True):
    """The `subagents continue` a continuation runs: the program, and the options after the
    sub-command's name (the store, the definitions' folders, the model)."""

    program: tuple[str, ...]
    options: tuple[str, ...]

    @classmethod
    def of(cls, state: Path, agents: Sequence[Path], *, offline: bool) -> ContinueCommand:
        options = ["--state", str(state)]
        for folder in agents:
            options += ["--agents", str(folder)]
        if offline:
            options.append("--offline")
        return cls((sys.executable, "-m", "subagents.cli.main"), tuple(options))

    def argv(self, run_id: str) -> list[str]:
        """The command line continuing ``run_id`` with the text on stdin."""
        return [*self.program, "continue", *self.options, "--detach", "--json", run_id, "-"]
